/* broker.kafka._cfetch: the compiled twin of the Kafka fetch path's MessageSet builder.
 *
 *   message_set(raw, ends, magic, max_bytes, whole_first) -> (bytes, count) | None
 *
 * The reference is broker/kafka/mapping.py's _message_set_py (with message_set_loop, its
 * one-record-at-a-time form): stored records (64-byte header, payload, user headers; record
 * i ends at ends[i] in raw) -> an uncompressed MessageSet of magic 0 or 1 (offset, size,
 * CRC-32 over magic..value, attributes 0, CreateTime = (origin_timestamp or timestamp) //
 * 1000 for magic 1, key, value), as many whole messages as fit max_bytes, and the first one
 * whole when whole_first.
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
    PyObject *raw_obj, *ends_obj, *magic_obj, *max_obj, *whole_obj;
    if (!PyArg_ParseTuple(args, "OOOOO", &raw_obj, &ends_obj, &magic_obj, &max_obj, &whole_obj))
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
    if (whole_first < 0) return decline();

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
        be32(p, (uint32_t)payload_len);
        memcpy(p + 4, h + HEADER_SIZE, (size_t)payload_len);
        be32(o + 12, crc32_ieee(o + 16, (size_t)(message - 16)));
        o += message;
        pos = end;
    }
    PyObject *result = Py_BuildValue("(Nn)", out, count);
    return result;
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
    {"message_set", message_set, METH_VARARGS,
     "(MessageSet, count) built from stored records, or None for a shape only the twin "
     "answers. See broker.kafka.mapping._message_set_py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "broker.kafka._cfetch",
    "The compiled twin of the Kafka fetch path's MessageSet builder (see data/speedups.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__cfetch(void) {
    crc_init();
    return PyModule_Create(&module);
}
