/* broker.kafka._cfetch: the compiled loops of the Kafka data path, each the twin of a
 * pure-Python reference in broker/kafka/mapping.py:
 *
 *   message_set(raw, ends, magic, max_bytes, whole_first[, empty_is_null])
 *       -> (bytes, count) | None
 *   record_batches(raw, ends, max_bytes, whole_first, log_append_time, leader_epoch
 *                  [, empty_is_null]) -> (bytes, count) | None   (Fetch v4+: batches v2)
 *   frame_batch(body, count, ...) -> (messages, ends) | None   (Produce: one batch v2)
 *   crc32 / crc32c / crc32c_tables                      (checksums, for the tests)
 *
 * Each declines (None) what it does not answer exactly, and the twin answers. The first:
 *
 * The reference is broker/kafka/mapping.py's _message_set_py (with message_set_loop, its
 * one-record-at-a-time form): stored records (64-byte header, payload, user headers; record
 * i ends at ends[i] in raw) -> an uncompressed MessageSet of magic 0 or 1 (offset, size,
 * CRC-32 over magic..value, attributes 0, CreateTime = (origin_timestamp or timestamp) //
 * 1000 for magic 1, key, value), as many whole messages as fit max_bytes, and the first one
 * whole when whole_first. With empty_is_null (a compacted topic, where an empty payload is
 * the tombstone: docs/storage.md) an empty value goes out as Kafka's null value (length -1).
 *
 * It answers only the shapes it knows exactly: each record's user headers empty (a null
 * key) or exactly one key header (string or raw value of 1-255 bytes: the key). Anything
 * else (other user headers, a record whose lengths do not add up, ends out of order or
 * past raw, an offset over 2^63 - 1, a magic other than 0 and 1, arguments of other types)
 * gives None, and the caller runs the Python twin, so the answer (bytes or error) is the
 * twin's by construction.
 *
 * CRC-32 (IEEE, zlib's) is computed here, slicing-by-16 over tables built at import from the
 * polynomial: zlib's crc32 was measured at ~190 ns for a 118-byte message body on this
 * machine (its braided loop leaves short buffers mostly to a byte-at-a-time tail), this at
 * ~42 ns; tests/kafka/test_fetch_equivalence.py holds ``crc32`` to zlib.crc32.
 * data/speedups.py decides whether this module runs (SKERRY_NO_EXTENSIONS=1: never);
 * tests/kafka/test_fetch_equivalence.py holds it to the reference.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_int64_ends.h" /* data/, on the include path (setup.py) */

#define HEADER_SIZE 64
#define KEY_OVERHEAD 13 /* name kind, name length, "key", value kind, value length */
#define MAX_KEY 255

static const unsigned char key_name_part[8] = {2, 3, 0, 0, 0, 'k', 'e', 'y'};

static uint32_t crc_table[16][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (int i = 0; i < 256; i++)
        for (int t = 1; t < 16; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t crc32_ieee(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint32_t (*T)[256] = (const uint32_t (*)[256])crc_table;
    while (n >= 16) {
        uint32_t a, b, d, e;
        memcpy(&a, p, 4); memcpy(&b, p + 4, 4); memcpy(&d, p + 8, 4); memcpy(&e, p + 12, 4);
        a ^= c;
        c = T[15][a & 0xff] ^ T[14][(a >> 8) & 0xff] ^ T[13][(a >> 16) & 0xff] ^ T[12][a >> 24]
          ^ T[11][b & 0xff] ^ T[10][(b >> 8) & 0xff] ^ T[9][(b >> 16) & 0xff] ^ T[8][b >> 24]
          ^ T[7][d & 0xff] ^ T[6][(d >> 8) & 0xff] ^ T[5][(d >> 16) & 0xff] ^ T[4][d >> 24]
          ^ T[3][e & 0xff] ^ T[2][(e >> 8) & 0xff] ^ T[1][(e >> 16) & 0xff] ^ T[0][e >> 24];
        p += 16;
        n -= 16;
    }
#endif
    while (n--) c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static inline uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t le64(const unsigned char *p) {
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static inline void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static inline void be64(unsigned char *p, uint64_t v) {
    be32(p, (uint32_t)(v >> 32)); be32(p + 4, (uint32_t)v);
}

/* Record ``start..end`` of ``b``: its key length (-1 null) and where the key starts; 0 when
 * it has a shape this module answers, -1 otherwise. */
static int record_shape(const unsigned char *b, Py_ssize_t start, Py_ssize_t end,
                        Py_ssize_t *key_len, Py_ssize_t *key_at) {
    if (end - start < HEADER_SIZE) return -1;
    const unsigned char *h = b + start;
    if (le64(h + 24) > (uint64_t)INT64_MAX) return -1;
    Py_ssize_t header_len = (Py_ssize_t)le32(h + 48);
    Py_ssize_t payload_len = (Py_ssize_t)le32(h + 52);
    if (HEADER_SIZE + payload_len + header_len != end - start) return -1;
    if (header_len == 0) {
        *key_len = -1;
        *key_at = 0;
        return 0;
    }
    const unsigned char *u = h + HEADER_SIZE + payload_len;
    Py_ssize_t k = header_len - KEY_OVERHEAD;
    if (k < 1 || k > MAX_KEY || memcmp(u, key_name_part, 8) != 0 || (u[8] != 1 && u[8] != 2)
        || (Py_ssize_t)le32(u + 9) != k)
        return -1;
    *key_len = k;
    *key_at = start + HEADER_SIZE + payload_len + KEY_OVERHEAD;
    return 0;
}

static PyObject *decline(void) {
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyObject *message_set(PyObject *self, PyObject *args) {
    PyObject *raw_obj, *ends_obj, *magic_obj, *max_obj, *whole_obj, *null_obj = NULL;
    if (!PyArg_ParseTuple(args, "OOOOO|O", &raw_obj, &ends_obj, &magic_obj, &max_obj,
                          &whole_obj, &null_obj))
        return NULL;
    if (!PyBytes_CheckExact(raw_obj) || !PyList_CheckExact(ends_obj)
        || !PyLong_CheckExact(magic_obj) || !PyLong_CheckExact(max_obj))
        return decline();
    long magic = PyLong_AsLong(magic_obj);
    if (magic != 0 && magic != 1) return decline();
    int overflow = 0;
    long long max_bytes = PyLong_AsLongLongAndOverflow(max_obj, &overflow);
    if (overflow > 0) max_bytes = LLONG_MAX;
    else if (overflow < 0) max_bytes = LLONG_MIN;
    else if (max_bytes == -1 && PyErr_Occurred()) return decline();
    int whole_first = PyObject_IsTrue(whole_obj);
    int empty_null = null_obj == NULL ? 0 : PyObject_IsTrue(null_obj);
    if (whole_first < 0 || empty_null < 0) return decline();

    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(raw_obj);
    Py_ssize_t raw_len = PyBytes_GET_SIZE(raw_obj);
    Py_ssize_t n = PyList_GET_SIZE(ends_obj);
    if (n == 0) return Py_BuildValue("(yi)", "", 0);
    const Py_ssize_t overhead = magic == 0 ? 26 : 34;

    /* Pass 1: every record checked; how many messages fit, and their bytes. */
    Py_ssize_t count = 0, pos = 0;
    long long size = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(ends_obj, i);
        if (!PyLong_CheckExact(item)) return decline();
        Py_ssize_t end = PyLong_AsSsize_t(item);
        if (end == -1 && PyErr_Occurred()) return decline();
        if (end < pos || end > raw_len) return decline();
        Py_ssize_t key_len, key_at;
        if (record_shape(b, pos, end, &key_len, &key_at) < 0) return decline();
        if (count == i) {
            Py_ssize_t payload_len = (Py_ssize_t)le32(b + pos + 52);
            Py_ssize_t message = overhead + (key_len > 0 ? key_len : 0) + payload_len;
            if (message - 12 > INT32_MAX) return decline();
            if (size + message > max_bytes && (count || !whole_first)) {
                /* the rest is not sent, but still checked: an odd record later declines */
            } else {
                size += message;
                count++;
            }
        }
        pos = end;
    }

    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (out == NULL) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t end = PyLong_AsSsize_t(PyList_GET_ITEM(ends_obj, i));
        Py_ssize_t key_len, key_at;
        record_shape(b, pos, end, &key_len, &key_at);
        const unsigned char *h = b + pos;
        Py_ssize_t payload_len = (Py_ssize_t)le32(h + 52);
        Py_ssize_t message = overhead + (key_len > 0 ? key_len : 0) + payload_len;
        be64(o, le64(h + 24));
        be32(o + 8, (uint32_t)(message - 12));
        unsigned char *p = o + 16;
        p[0] = (unsigned char)magic;
        p[1] = 0;
        p += 2;
        if (magic == 1) {
            uint64_t origin = le64(h + 40);
            be64(p, (origin ? origin : le64(h + 32)) / 1000);
            p += 8;
        }
        if (key_len > 0) {
            be32(p, (uint32_t)key_len);
            memcpy(p + 4, b + key_at, (size_t)key_len);
            p += 4 + key_len;
        } else {
            memset(p, 0xFF, 4);
            p += 4;
        }
        if (empty_null && payload_len == 0) memset(p, 0xFF, 4);  /* a tombstone: null */
        else be32(p, (uint32_t)payload_len);
        memcpy(p + 4, h + HEADER_SIZE, (size_t)payload_len);
        be32(o + 12, crc32_ieee(o + 16, (size_t)(message - 16)));
        o += message;
        pos = end;
    }
    PyObject *result = Py_BuildValue("(Nn)", out, count);
    return result;
}

/* ---------------------------------------------------------------- record batches v2
 *
 * record_batches(raw, ends, max_bytes, whole_first, log_append_time, leader_epoch
 *                [, empty_is_null]) -> (bytes, count) | None
 *
 * The reference is broker/kafka/mapping.py's _record_batches_py: stored records -> record
 * batches v2 (one batch for the run; under LogAppendTime one per run of records appended in
 * the same millisecond), key and headers by mapping.stored_kafka's rule (the first string
 * "key" header with a string or raw value is the key; "kafka.headers" entries with raw
 * values hold a header list in Kafka's encoding, which comes first; every other user header
 * is a header). It declines (None) whatever it does not know exactly: malformed user
 * headers, a "kafka.headers" list that does not decode, lengths that do not add up, ends
 * out of order, an offset over 2^63 - 1, an offset delta beyond int32, bad arguments.
 * With empty_is_null (a compacted topic) an empty value is written as the null value
 * (varint -1), the tombstone Kafka's compacted topics carry.
 * CRC-32C: SSE4.2's crc32 instruction where the CPU has it, else slicing-by-8 tables. */

static uint32_t crc32c_table[8][256];
static int crc32c_hw;

static void crc32c_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0x82F63B78u ^ (c >> 1) : c >> 1;
        crc32c_table[0][i] = c;
    }
    for (int i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc32c_table[t][i] = (crc32c_table[t - 1][i] >> 8)
                ^ crc32c_table[0][crc32c_table[t - 1][i] & 0xff];
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    crc32c_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc32c_sw(uint32_t c, const unsigned char *p, size_t n) {
    while (n >= 8) {
        uint32_t a = ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                      | (uint32_t)p[3] << 24) ^ c;
        c = crc32c_table[7][a & 0xff] ^ crc32c_table[6][(a >> 8) & 0xff]
          ^ crc32c_table[5][(a >> 16) & 0xff] ^ crc32c_table[4][a >> 24]
          ^ crc32c_table[3][p[4]] ^ crc32c_table[2][p[5]] ^ crc32c_table[1][p[6]]
          ^ crc32c_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = crc32c_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_sse(uint32_t c, const unsigned char *p, size_t n) {
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--) c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

static uint32_t crc32c(const unsigned char *p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc32c_hw) return crc32c_sse(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
#endif
    return crc32c_sw(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

static inline Py_ssize_t varint_size(int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 1;
    while (z >= 0x80) { z >>= 7; n++; }
    return n;
}

static inline unsigned char *put_varint(unsigned char *p, int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) { *p++ = (unsigned char)(z | 0x80); z >>= 7; }
    *p++ = (unsigned char)z;
    return p;
}

/* A zigzag varint of at most ``limit`` bytes, as batches._varint reads it; -1: bad. */
static int get_varint(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int limit,
                      int64_t *out) {
    uint64_t r = 0;
    int shift = 0;
    Py_ssize_t start = *pos, p = *pos;
    for (;;) {
        if (p >= end) return -1;
        unsigned char c = b[p++];
        r |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) break;
        shift += 7;
        if (p - start >= limit) return -1;
    }
    *pos = p;
    *out = (int64_t)(r >> 1) ^ -(int64_t)(r & 1);
    return 0;
}

static const unsigned char kafka_headers_name[13] = {'k', 'a', 'f', 'k', 'a', '.', 'h', 'e',
                                                     'a', 'd', 'e', 'r', 's'};

typedef struct {
    uint64_t offset;
    int64_t ts;
    const unsigned char *payload;
    Py_ssize_t payload_len;
    int64_t value_len;             /* as sent: -1 (null) for a tombstone, else payload_len */
    const unsigned char *key;
    Py_ssize_t key_len;            /* -1: null */
    const unsigned char *uh;       /* user headers */
    Py_ssize_t uh_len;
    int64_t listed;                /* headers in the kafka.headers list (0: none) */
    Py_ssize_t list_skip;          /* bytes of the list's count varint */
    Py_ssize_t list_len;           /* bytes of the list (count varint included) */
    int64_t plain;                 /* other user headers */
    Py_ssize_t plain_bytes;        /* their encoded size */
} rec_t;

typedef struct {
    unsigned char *buf;
    Py_ssize_t cap;
} scratch_t;

/* Whether ``b[0:n]`` is one whole header list (batches.decode_headers' rule); its count
 * and the size of the count varint. */
static int check_list(const unsigned char *b, Py_ssize_t n, int64_t *count, Py_ssize_t *skip) {
    Py_ssize_t p = 0;
    int64_t c;
    if (get_varint(b, &p, n, 5, &c) < 0) return -1;
    if (c < 0 || c > n - p) return -1;
    *count = c;
    *skip = p;
    for (int64_t i = 0; i < c; i++) {
        int64_t k, v;
        if (get_varint(b, &p, n, 5, &k) < 0 || k < 0 || p + k > n) return -1;
        p += k;
        if (get_varint(b, &p, n, 5, &v) < 0) return -1;
        if (v == -1) continue;
        if (v < 0 || p + v > n) return -1;
        p += v;
    }
    return p == n ? 0 : -1;
}

/* Record ``start..end``: its fields for a batch, ``lat`` choosing the timestamp; -1 to
 * decline. */
static int parse_record(const unsigned char *b, Py_ssize_t start, Py_ssize_t end, int lat,
                        int empty_null, rec_t *r, scratch_t *s) {
    if (end - start < HEADER_SIZE) return -1;
    const unsigned char *h = b + start;
    r->offset = le64(h + 24);
    if (r->offset > (uint64_t)INT64_MAX) return -1;
    uint64_t appended = le64(h + 32), origin = le64(h + 40);
    r->ts = (int64_t)((lat ? appended : (origin ? origin : appended)) / 1000);
    Py_ssize_t header_len = (Py_ssize_t)le32(h + 48);
    r->payload_len = (Py_ssize_t)le32(h + 52);
    if (HEADER_SIZE + r->payload_len + header_len != end - start) return -1;
    r->payload = h + HEADER_SIZE;
    r->value_len = empty_null && r->payload_len == 0 ? -1 : r->payload_len;
    r->uh = r->payload + r->payload_len;
    r->uh_len = header_len;
    r->key = NULL;
    r->key_len = -1;
    r->listed = 0;
    r->list_skip = 0;
    r->list_len = 0;
    r->plain = 0;
    r->plain_bytes = 0;
    if (header_len == 0) return 0;
    const unsigned char *u = r->uh;
    Py_ssize_t p = 0, n = header_len, list_len = 0;
    int taken = 0;
    while (p < n) {
        if (p + 5 > n) return -1;
        unsigned kk = u[p];
        Py_ssize_t kl = (Py_ssize_t)le32(u + p + 1);
        if (kk < 1 || kk > 15 || kl < 1 || kl > 255 || p + 5 + kl + 5 > n) return -1;
        const unsigned char *name = u + p + 5;
        Py_ssize_t q = p + 5 + kl;
        unsigned vk = u[q];
        Py_ssize_t vl = (Py_ssize_t)le32(u + q + 1);
        if (vk < 1 || vk > 15 || vl < 1 || vl > 255 || q + 5 + vl > n) return -1;
        const unsigned char *value = u + q + 5;
        p = q + 5 + vl;
        if (!taken && kk == 2 && kl == 3 && memcmp(name, "key", 3) == 0 && (vk == 1 || vk == 2)) {
            taken = 1;
            r->key = value;
            r->key_len = vl;
            continue;
        }
        if (kk == 2 && kl == 13 && memcmp(name, kafka_headers_name, 13) == 0 && vk == 1) {
            if (list_len + vl > s->cap) {
                Py_ssize_t cap = (list_len + vl) * 2;
                unsigned char *nb = PyMem_Realloc(s->buf, (size_t)cap);
                if (nb == NULL) return -1;
                s->buf = nb;
                s->cap = cap;
            }
            memcpy(s->buf + list_len, value, (size_t)vl);
            list_len += vl;
            continue;
        }
        r->plain++;
        r->plain_bytes += varint_size(kl) + kl + varint_size(vl) + vl;
    }
    if (list_len) {
        if (check_list(s->buf, list_len, &r->listed, &r->list_skip) < 0) return -1;
        r->list_len = list_len;
    }
    return 0;
}

/* The bytes of a record's body (after its length varint) with these deltas. */
static inline Py_ssize_t body_size(const rec_t *r, int64_t ts_delta, int64_t off_delta) {
    return 1 + varint_size(ts_delta) + varint_size(off_delta)
        + (r->key_len < 0 ? 1 : varint_size(r->key_len) + r->key_len)
        + varint_size(r->value_len) + r->payload_len
        + varint_size(r->listed + r->plain) + (r->list_len - r->list_skip) + r->plain_bytes;
}

static unsigned char *write_record(unsigned char *o, const rec_t *r, int64_t ts_delta,
                                   int64_t off_delta, Py_ssize_t body) {
    o = put_varint(o, body);
    *o++ = 0;
    o = put_varint(o, ts_delta);
    o = put_varint(o, off_delta);
    if (r->key_len < 0) {
        *o++ = 1;
    } else {
        o = put_varint(o, r->key_len);
        memcpy(o, r->key, (size_t)r->key_len);
        o += r->key_len;
    }
    o = put_varint(o, r->value_len);
    memcpy(o, r->payload, (size_t)r->payload_len);
    o += r->payload_len;
    o = put_varint(o, r->listed + r->plain);
    if (!r->uh_len) return o;
    const unsigned char *u = r->uh;
    Py_ssize_t p = 0, skip = r->list_skip;
    int taken = 0;
    /* the kafka.headers list first (its count varint skipped), then the others */
    for (int pass = 0; pass < 2; pass++) {
        p = 0;
        taken = 0;
        while (p < r->uh_len) {
            Py_ssize_t kl = (Py_ssize_t)le32(u + p + 1);
            const unsigned char *name = u + p + 5;
            Py_ssize_t q = p + 5 + kl;
            unsigned kk = u[p], vk = u[q];
            Py_ssize_t vl = (Py_ssize_t)le32(u + q + 1);
            const unsigned char *value = u + q + 5;
            p = q + 5 + vl;
            if (!taken && kk == 2 && kl == 3 && memcmp(name, "key", 3) == 0
                && (vk == 1 || vk == 2)) {
                taken = 1;
                continue;
            }
            int reserved = kk == 2 && kl == 13 && memcmp(name, kafka_headers_name, 13) == 0
                && vk == 1;
            if (pass == 0 && reserved) {
                Py_ssize_t cut = skip < vl ? skip : vl;
                skip -= cut;
                memcpy(o, value + cut, (size_t)(vl - cut));
                o += vl - cut;
            } else if (pass == 1 && !reserved) {
                o = put_varint(o, kl);
                memcpy(o, name, (size_t)kl);
                o += kl;
                o = put_varint(o, vl);
                memcpy(o, value, (size_t)vl);
                o += vl;
            }
        }
    }
    return o;
}

static unsigned char *finish_batch(unsigned char *head, unsigned char *end, uint64_t base_offset,
                                   int64_t last_delta, int64_t base_ts, int64_t max_ts,
                                   int32_t records, int lat, int32_t leader_epoch) {
    be64(head, base_offset);
    be32(head + 8, (uint32_t)(end - head - 12));
    be32(head + 12, (uint32_t)leader_epoch);
    head[16] = 2;
    head[21] = 0;
    head[22] = lat ? 8 : 0;
    be32(head + 23, (uint32_t)last_delta);
    be64(head + 27, (uint64_t)base_ts);
    be64(head + 35, (uint64_t)max_ts);
    memset(head + 43, 0xFF, 14);  /* producer id, epoch, base sequence: -1 */
    be32(head + 57, (uint32_t)records);
    be32(head + 17, crc32c(head + 21, (size_t)(end - head - 21)));
    return end;
}

static PyObject *batches_of(PyObject *, PyObject *, const int64_t *, Py_ssize_t, PyObject *,
                            PyObject *, PyObject *, PyObject *, PyObject *);

static PyObject *record_batches(PyObject *self, PyObject *args) {
    PyObject *raw_obj, *ends_obj, *max_obj, *whole_obj, *lat_obj, *epoch_obj, *null_obj = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOO|O", &raw_obj, &ends_obj, &max_obj, &whole_obj,
                          &lat_obj, &epoch_obj, &null_obj))
        return NULL;
    if (!PyBytes_CheckExact(raw_obj) || !PyLong_CheckExact(max_obj)
        || !PyLong_CheckExact(epoch_obj))
        return decline();
    Py_buffer view;
    int viewed = int64_ends(ends_obj, &view);
    if (!viewed && !PyList_CheckExact(ends_obj)) return decline();
    PyObject *got = batches_of(raw_obj, ends_obj, viewed ? (const int64_t *)view.buf : NULL,
                               viewed ? view.len / 8 : 0, max_obj, whole_obj, lat_obj,
                               epoch_obj, null_obj);
    if (viewed) PyBuffer_Release(&view);
    return got;
}

/* record_batches over ``ends_obj`` (a list) or, when ``given`` is not NULL, ``n_given``
 * 64-bit ends read in place. */
static PyObject *batches_of(PyObject *raw_obj, PyObject *ends_obj, const int64_t *given,
                            Py_ssize_t n_given, PyObject *max_obj, PyObject *whole_obj,
                            PyObject *lat_obj, PyObject *epoch_obj, PyObject *null_obj) {
    int overflow = 0;
    long long max_bytes = PyLong_AsLongLongAndOverflow(max_obj, &overflow);
    if (overflow > 0) max_bytes = LLONG_MAX;
    else if (overflow < 0) max_bytes = LLONG_MIN;
    else if (max_bytes == -1 && PyErr_Occurred()) return decline();
    long epoch = PyLong_AsLong(epoch_obj);
    if ((epoch == -1 && PyErr_Occurred()) || epoch < INT32_MIN || epoch > INT32_MAX)
        return decline();
    int whole_first = PyObject_IsTrue(whole_obj);
    int lat = PyObject_IsTrue(lat_obj);
    int empty_null = null_obj == NULL ? 0 : PyObject_IsTrue(null_obj);
    if (whole_first < 0 || lat < 0 || empty_null < 0) return decline();

    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(raw_obj);
    Py_ssize_t raw_len = PyBytes_GET_SIZE(raw_obj);
    Py_ssize_t n = given != NULL ? n_given : PyList_GET_SIZE(ends_obj);
    if (n == 0) return Py_BuildValue("(yi)", "", 0);
    scratch_t s = {NULL, 0};
    rec_t r;

    /* Pass 1: the records taken and the bytes of the answer. */
    Py_ssize_t count = 0, pos = 0, in_batch = 0;
    long long size = 0;
    uint64_t base_offset = 0;
    int64_t base_ts = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t end;
        if (given != NULL) {
            end = (Py_ssize_t)given[i];
        } else {
            PyObject *item = PyList_GET_ITEM(ends_obj, i);
            if (!PyLong_CheckExact(item)) goto declined;
            end = PyLong_AsSsize_t(item);
            if (end == -1 && PyErr_Occurred()) goto declined;
        }
        if (end < pos || end > raw_len) goto declined;
        if (parse_record(b, pos, end, lat, empty_null, &r, &s) < 0) goto declined;
        int fresh = !in_batch || (lat && r.ts != base_ts);
        int64_t bts = fresh ? r.ts : base_ts;
        uint64_t boff = fresh ? r.offset : base_offset;
        int64_t off_delta = (int64_t)(r.offset - boff);
        if (r.offset < boff || off_delta > INT32_MAX) goto declined;
        Py_ssize_t body = body_size(&r, r.ts - bts, off_delta);
        long long add = varint_size(body) + body + (fresh ? 61 : 0);
        if (size + add > max_bytes && (count || !whole_first)) break;
        if (size + add > INT32_MAX) goto declined;
        if (fresh) {
            in_batch = 1;
            base_ts = r.ts;
            base_offset = r.offset;
        }
        size += add;
        count++;
        pos = end;
    }

    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (out == NULL) {
        PyMem_Free(s.buf);
        return NULL;
    }
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    unsigned char *head = NULL;
    int64_t max_ts = 0, last_delta = 0;
    int32_t records = 0;
    pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t end = given != NULL ? (Py_ssize_t)given[i]
                                       : PyLong_AsSsize_t(PyList_GET_ITEM(ends_obj, i));
        parse_record(b, pos, end, lat, empty_null, &r, &s);
        int fresh = head == NULL || (lat && r.ts != base_ts);
        if (fresh) {
            if (head != NULL)
                finish_batch(head, o, base_offset, last_delta, base_ts, max_ts, records, lat,
                             (int32_t)epoch);
            head = o;
            o += 61;
            base_ts = max_ts = r.ts;
            base_offset = r.offset;
            records = 0;
        }
        int64_t off_delta = (int64_t)(r.offset - base_offset);
        Py_ssize_t body = body_size(&r, r.ts - base_ts, off_delta);
        o = write_record(o, &r, r.ts - base_ts, off_delta, body);
        if (r.ts > max_ts) max_ts = r.ts;
        last_delta = off_delta;
        records++;
        pos = end;
    }
    if (head != NULL)
        finish_batch(head, o, base_offset, last_delta, base_ts, max_ts, records, lat,
                     (int32_t)epoch);
    PyMem_Free(s.buf);
    return Py_BuildValue("(Nn)", out, count);

declined:
    PyMem_Free(s.buf);
    return decline();
}

/* ---------------------------------------------------------------- produce: one batch framed
 *
 * frame_batch(body, count, base_ts, max_ts, log_append_time, last_offset_delta, now_us,
 *             max_value) -> (messages, ends) | None
 *
 * The reference is broker/kafka/mapping.py's framed_batches over RawBatch.records(): the
 * records of one opened batch (``body``, ``count`` of them) -> stored records framed for
 * BrokerCore.produce, framed (64-byte header with the origin timestamp, payload, then the
 * user headers: the key header, then the Kafka headers as mapping.kafka_headers_user lays
 * them out: one string-named raw entry each when that is unambiguous, else the canonical
 * header list cut into "kafka.headers" entries of at most 255 bytes). Anything the
 * reference refuses (a malformed record, a wrong count or last offset delta, a key over 255
 * bytes, a value over ``max_value`` bytes, a timestamp the store cannot hold) declines
 * (None) and the Python path answers with its refusal. */

#define MAX_TIMESTAMP_MS 18446744073709551LL /* (2^64 - 1) // 1000 */

/* Python's strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
static int utf8_valid(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            unsigned c1 = s[i + 1];
            if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F)) return 0;
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            unsigned c1 = s[i + 1];
            if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) return 0;
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

#define MAX_HEADERS 64 /* more headers in one record: the Python path */

typedef struct {
    Py_ssize_t key_at, key_len, value_at, value_len; /* value_len -1: null */
} kheader_t;

static int reserved_name(const unsigned char *n, Py_ssize_t len) {
    return (len == 3 && (memcmp(n, "key", 3) == 0 || memcmp(n, "pid", 3) == 0
                         || memcmp(n, "seq", 3) == 0))
        || (len == 13 && memcmp(n, kafka_headers_name, 13) == 0);
}

typedef struct {
    const unsigned char *key;
    Py_ssize_t key_len;          /* -1 null */
    int key_kind;                /* 2 string, 1 raw */
    const unsigned char *value;
    Py_ssize_t value_len;        /* -1 null */
    int64_t ts;
    int64_t off_delta;
    Py_ssize_t stop;
    int nh;
    int plain;
    kheader_t h[MAX_HEADERS];
    Py_ssize_t list_len;         /* the canonical header list's bytes (reserved form) */
    Py_ssize_t user_len;         /* user header bytes of the Kafka headers */
} prec_t;

/* One record at ``*pos``: checked as RawBatch.records() and framed_batches check it; -1 to
 * decline. */
static int parse_produced(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end,
                          long long base_ts, long long max_ts, int lat, long long max_value,
                          prec_t *r) {
    int64_t length, key_len, value_len, hc;
    if (get_varint(b, pos, end, 5, &length) < 0) return -1;
    if (length < 6 || length > end - *pos) return -1;
    Py_ssize_t stop = *pos + (Py_ssize_t)length, at = *pos + 1;
    int64_t ts_delta;
    if (get_varint(b, &at, stop, 10, &ts_delta) < 0) return -1;
    if (get_varint(b, &at, stop, 5, &r->off_delta) < 0) return -1;
    if (get_varint(b, &at, stop, 5, &key_len) < 0) return -1;
    r->key = b + at;
    r->key_len = -1;
    r->key_kind = 2;
    if (key_len >= 0) {
        if (key_len > stop - at) return -1;
        r->key_len = (Py_ssize_t)key_len;
        at += r->key_len;
        if (key_len > 255) return -1;
        if (key_len > 0 && !utf8_valid(r->key, r->key_len)) r->key_kind = 1;
    } else if (key_len < -1) {
        return -1;
    }
    if (get_varint(b, &at, stop, 5, &value_len) < 0) return -1;
    r->value = b + at;
    r->value_len = -1;
    if (value_len >= 0) {
        if (value_len > stop - at) return -1;
        r->value_len = (Py_ssize_t)value_len;
        at += r->value_len;
        if (value_len > max_value) return -1;
    } else if (value_len < -1) {
        return -1;
    }
    if (get_varint(b, &at, stop, 5, &hc) < 0) return -1;
    if (hc < 0 || hc > stop - at || hc > MAX_HEADERS) return -1;
    r->nh = (int)hc;
    r->plain = 1;
    r->list_len = varint_size(hc);
    for (int i = 0; i < r->nh; i++) {
        int64_t kl, vl;
        kheader_t *h = &r->h[i];
        if (get_varint(b, &at, stop, 5, &kl) < 0 || kl < 0 || kl > stop - at) return -1;
        h->key_at = at;
        h->key_len = (Py_ssize_t)kl;
        at += h->key_len;
        if (get_varint(b, &at, stop, 5, &vl) < 0) return -1;
        if (vl >= 0) {
            if (vl > stop - at) return -1;
            h->value_at = at;
            h->value_len = (Py_ssize_t)vl;
            at += h->value_len;
        } else if (vl == -1) {
            h->value_at = at;
            h->value_len = -1;
        } else {
            return -1;
        }
        r->list_len += varint_size(h->key_len) + h->key_len
            + (h->value_len < 0 ? 1 : varint_size(h->value_len) + h->value_len);
        if (r->plain) {
            if (h->value_len < 1 || h->value_len > 255 || h->key_len < 1 || h->key_len > 255
                || reserved_name(b + h->key_at, h->key_len)
                || !utf8_valid(b + h->key_at, h->key_len)) {
                r->plain = 0;
            } else {
                for (int j = 0; j < i; j++)
                    if (r->h[j].key_len == h->key_len
                        && memcmp(b + r->h[j].key_at, b + h->key_at, (size_t)h->key_len) == 0) {
                        r->plain = 0;
                        break;
                    }
            }
        }
    }
    if (at != stop) return -1;
    int64_t ts;
    if (lat) ts = max_ts;
    else if (__builtin_add_overflow((int64_t)base_ts, ts_delta, &ts)) return -1;
    if (ts > MAX_TIMESTAMP_MS) return -1;
    r->ts = ts;
    r->stop = stop;
    if (r->nh == 0) {
        r->user_len = 0;
    } else if (r->plain) {
        r->user_len = 0;
        for (int i = 0; i < r->nh; i++) r->user_len += 10 + r->h[i].key_len + r->h[i].value_len;
    } else {
        Py_ssize_t chunks = (r->list_len + 254) / 255;
        r->user_len = r->list_len + chunks * (10 + 13);
    }
    *pos = stop;
    return 0;
}

static inline unsigned char *put_le32(unsigned char *o, uint32_t v) {
    for (int k = 0; k < 4; k++) o[k] = (unsigned char)(v >> (8 * k));
    return o + 4;
}

static unsigned char *put_entry(unsigned char *o, int key_kind, const unsigned char *name,
                                Py_ssize_t name_len, int value_kind, const unsigned char *value,
                                Py_ssize_t value_len) {
    *o++ = (unsigned char)key_kind;
    o = put_le32(o, (uint32_t)name_len);
    memcpy(o, name, (size_t)name_len);
    o += name_len;
    *o++ = (unsigned char)value_kind;
    o = put_le32(o, (uint32_t)value_len);
    memcpy(o, value, (size_t)value_len);
    return o + value_len;
}

static unsigned char *write_produced(unsigned char *o, const unsigned char *b, const prec_t *r,
                                     long long now_us, unsigned char *list) {
    uint64_t origin = r->ts >= 0 ? (uint64_t)r->ts * 1000 : (uint64_t)now_us;
    uint32_t vl = r->value_len > 0 ? (uint32_t)r->value_len : 0;
    uint32_t hl = (r->key_len > 0 ? (uint32_t)(KEY_OVERHEAD + r->key_len) : 0)
        + (uint32_t)r->user_len;
    memset(o, 0, 40);
    for (int k = 0; k < 8; k++) o[40 + k] = (unsigned char)(origin >> (8 * k));
    put_le32(o + 48, hl);
    put_le32(o + 52, vl);
    memset(o + 56, 0, 8);
    o += HEADER_SIZE;
    memcpy(o, r->value, vl);
    o += vl;
    if (r->key_len > 0)
        o = put_entry(o, 2, (const unsigned char *)"key", 3, r->key_kind, r->key, r->key_len);
    if (r->nh == 0) return o;
    if (r->plain) {
        for (int i = 0; i < r->nh; i++)
            o = put_entry(o, 2, b + r->h[i].key_at, r->h[i].key_len, 1, b + r->h[i].value_at,
                          r->h[i].value_len);
        return o;
    }
    unsigned char *p = put_varint(list, r->nh);
    for (int i = 0; i < r->nh; i++) {
        p = put_varint(p, r->h[i].key_len);
        memcpy(p, b + r->h[i].key_at, (size_t)r->h[i].key_len);
        p += r->h[i].key_len;
        if (r->h[i].value_len < 0) {
            *p++ = 1;
        } else {
            p = put_varint(p, r->h[i].value_len);
            memcpy(p, b + r->h[i].value_at, (size_t)r->h[i].value_len);
            p += r->h[i].value_len;
        }
    }
    for (Py_ssize_t at = 0; at < r->list_len; at += 255) {
        Py_ssize_t n = r->list_len - at < 255 ? r->list_len - at : 255;
        o = put_entry(o, 2, kafka_headers_name, 13, 1, list + at, n);
    }
    return o;
}

static PyObject *frame_batch(PyObject *self, PyObject *args) {
    Py_buffer body;
    long long count, base_ts, max_ts, last_delta, now_us, max_value;
    int lat;
    if (!PyArg_ParseTuple(args, "y*LLLpLLL", &body, &count, &base_ts, &max_ts, &lat,
                          &last_delta, &now_us, &max_value)) {
        return decline();
    }
    const unsigned char *b = (const unsigned char *)body.buf;
    Py_ssize_t end = body.len, pos = 0;
    PyObject *out = NULL, *ends = NULL;
    unsigned char *list = NULL;
    prec_t *r = PyMem_Malloc(sizeof(prec_t));
    if (r == NULL) {
        PyBuffer_Release(&body);
        return PyErr_NoMemory();
    }
    if (count < 0 || count > end / 7 + 1 || now_us < 0) goto declined;
    /* Pass 1: check every record; the bytes of the framed records. */
    Py_ssize_t total = 0, longest_list = 0;
    int64_t last = -1;
    for (long long i = 0; i < count; i++) {
        if (parse_produced(b, &pos, end, base_ts, max_ts, lat, max_value, r) < 0) goto declined;
        total += HEADER_SIZE + (r->value_len > 0 ? r->value_len : 0)
            + (r->key_len > 0 ? KEY_OVERHEAD + r->key_len : 0) + r->user_len;
        if (r->nh && !r->plain && r->list_len > longest_list) longest_list = r->list_len;
        last = r->off_delta;
    }
    if (pos != end || (count && last != last_delta)) goto declined;
    if (longest_list) {
        list = PyMem_Malloc((size_t)longest_list);
        if (list == NULL) {
            PyErr_NoMemory();
            goto failed;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    ends = PyList_New((Py_ssize_t)count);
    if (out == NULL || ends == NULL) goto failed;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    unsigned char *start = o;
    pos = 0;
    for (long long i = 0; i < count; i++) {
        parse_produced(b, &pos, end, base_ts, max_ts, lat, max_value, r);
        o = write_produced(o, b, r, now_us, list);
        PyObject *e = PyLong_FromSsize_t((Py_ssize_t)(o - start));
        if (e == NULL) goto failed;
        PyList_SET_ITEM(ends, (Py_ssize_t)i, e);
    }
    PyMem_Free(list);
    PyMem_Free(r);
    PyBuffer_Release(&body);
    return Py_BuildValue("(NN)", out, ends);

declined:
    PyMem_Free(r);
    PyBuffer_Release(&body);
    return decline();
failed:
    Py_XDECREF(out);
    Py_XDECREF(ends);
    PyMem_Free(list);
    PyMem_Free(r);
    PyBuffer_Release(&body);
    return NULL;
}

static PyObject *crc32c_py(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t c = crc32c((const unsigned char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyObject *crc32c_sw_py(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t c = crc32c_sw(0xFFFFFFFFu, (const unsigned char *)view.buf, (size_t)view.len)
        ^ 0xFFFFFFFFu;
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyObject *crc32_py(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t c = crc32_ieee((const unsigned char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyMethodDef methods[] = {
    {"crc32", crc32_py, METH_O, "CRC-32 of a bytes-like object, as zlib.crc32(data)."},
    {"crc32c", crc32c_py, METH_O, "CRC-32C of a bytes-like object (hardware where it can)."},
    {"crc32c_tables", crc32c_sw_py, METH_O, "CRC-32C by the tables alone (for the tests)."},
    {"record_batches", record_batches, METH_VARARGS,
     "(record batches v2, count) built from stored records, or None for a shape only the "
     "twin answers. See broker.kafka.mapping._record_batches_py."},
    {"frame_batch", frame_batch, METH_VARARGS,
     "(stored records, ends) framed from one opened batch v2, or None for a shape only the "
     "Python path answers. See broker.kafka.mapping.framed_raw_batches."},
    {"message_set", message_set, METH_VARARGS,
     "(MessageSet, count) built from stored records, or None for a shape only the twin "
     "answers. See broker.kafka.mapping._message_set_py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "broker.kafka._cfetch",
    "The compiled loops of the Kafka data path (see data/speedups.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__cfetch(void) {
    crc_init();
    crc32c_init();
    return PyModule_Create(&module);
}
