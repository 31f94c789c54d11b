/* data._cspeedups: the compiled twin of Skerry's per-message loops.
 *
 * Every function here has a pure-Python reference with the same name and contract in the
 * module named beside it; data/speedups.py decides which one runs (SKERRY_NO_EXTENSIONS=1
 * forces the Python ones) and tests/data/test_speedups_equivalence.py holds the two to the
 * same bytes and the same errors.
 *
 *   fnv1a_32(data)                            data/keys.py     (_fnv1a_32_py)
 *   build_records(ids, payloads, headers,     data/writer.py   (_build_records_py)
 *                 origins, first_offset,
 *                 timestamp, start_position)
 *   verify_run(data, ends, first_offset,      data/reader.py   (_verify_run_py)
 *              budget, take_first)
 *   decode_run(data, ends, first_offset,      data/reader.py   (_decode_run_py)
 *              out, budget, take_first, Record)
 *   stamp_framed(messages, ends, first_offset, data/writer.py   (_stamp_framed_py)
 *                timestamp, start_position, random_ids)
 *   consume_items(raw, ends, first_offset)    data/format.py   (_consume_items_py)
 *   record_heads(data, start, end, out)       data/spark/records.py (_record_heads_py)
 *   scan_stamped(data, first_offset,          data/writer.py   (_scan_stamped_py)
 *                start_position)
 *   producer_runs(data)                       data/idempotence.py (_producer_runs_py)
 *
 * Batch in, batch out: one call per batch of records, never one per message.
 *
 * XXH3-64 (seed 0) is not compiled in: it is taken at import time from the xxhash package
 * the project already depends on (its extension module exports XXH3_64bits), so the
 * checksum is the very function the Python twin calls. When that symbol cannot be found
 * the import fails and the Python twin runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "_int64_ends.h"

typedef uint64_t (*xxh3_fn)(const void *, size_t);
static xxh3_fn xxh3 = NULL;

#define HEADER_SIZE 64
#define MAX_U32 0xFFFFFFFFull

static inline void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) { p[i] = (unsigned char)(v & 0xFF); v >>= 8; }
}
static inline void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) { p[i] = (unsigned char)(v & 0xFF); v >>= 8; }
}
static inline uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ------------------------------------------------------------------ fnv1a_32 */

static PyObject *fnv1a_32(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *p = view.buf;
    uint32_t h = 0x811C9DC5u;
    for (Py_ssize_t i = 0; i < view.len; i++) { h ^= p[i]; h *= 0x01000193u; }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(h);
}

/* ------------------------------------------------------------------ build_records */

/* A u64 from a Python int (anything with __index__); -1 with *kind set when it is not an
 * int (kind 1) or does not fit (kind 2). */
static int as_u64(PyObject *obj, uint64_t *out, int *kind) {
    PyObject *index = PyNumber_Index(obj);
    if (index == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -2;
        PyErr_Clear();
        *kind = 1;
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(index);
    Py_DECREF(index);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -2;
        PyErr_Clear();
        *kind = 2;
        return -1;
    }
    *out = v;
    return 0;
}

/* type(obj).__name__ (tp_name after its last dot, as Python shows it). */
static const char *type_name(PyObject *obj) {
    const char *name = Py_TYPE(obj)->tp_name;
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}

static int is_buffer(PyObject *obj) {
    return PyBytes_CheckExact(obj) || PyObject_CheckBuffer(obj);
}

static PyObject *build_records(PyObject *self, PyObject *args) {
    Py_buffer ids;
    PyObject *payloads_in, *headers_in, *origins_in, *first_obj, *ts_obj;
    Py_ssize_t start_position;
    if (!PyArg_ParseTuple(args, "y*OOOOOn", &ids, &payloads_in, &headers_in, &origins_in,
                          &first_obj, &ts_obj, &start_position))
        return NULL;
    PyObject *payloads = NULL, *headers = NULL, *origins = NULL, *out = NULL, *ends = NULL;
    PyObject *result = NULL, *first_index = NULL;
    Py_buffer pv, hv;
    payloads = PySequence_Fast(payloads_in, "payloads must be a sequence");
    if (payloads == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(payloads);
    if (headers_in != Py_None) {
        headers = PySequence_Fast(headers_in, "user headers must be a sequence");
        if (headers == NULL) goto done;
        if (PySequence_Fast_GET_SIZE(headers) != n) {
            PyErr_Format(PyExc_ValueError, "%zd user headers for %zd messages",
                         PySequence_Fast_GET_SIZE(headers), n);
            goto done;
        }
    }
    if (origins_in != Py_None) {
        origins = PySequence_Fast(origins_in, "origin timestamps must be a sequence");
        if (origins == NULL) goto done;
        if (PySequence_Fast_GET_SIZE(origins) != n) {
            PyErr_Format(PyExc_ValueError, "%zd origin timestamps for %zd messages",
                         PySequence_Fast_GET_SIZE(origins), n);
            goto done;
        }
    }
    if (ids.len != 16 * n) {
        PyErr_Format(PyExc_ValueError, "%zd id bytes for %zd messages", ids.len, n);
        goto done;
    }
    /* The first offset and the timestamp: the per-record checks below say which record
     * they fail on (the offset of record i is first_offset + i). */
    uint64_t first = 0, timestamp = 0;
    int first_kind = 0, ts_kind = 0;
    first_index = PyNumber_Index(first_obj);
    if (first_index == NULL) goto done;
    int rc = as_u64(first_index, &first, &first_kind);
    if (rc == -2) goto done;
    rc = as_u64(ts_obj, &timestamp, &ts_kind);
    if (rc == -2) goto done;

    /* Pass 1: every record's fields checked in the reference's order, sizes summed. */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        /* offset */
        if (first_kind || (uint64_t)i > UINT64_MAX - first) {
            PyObject *step = PyLong_FromSsize_t(i);
            if (step == NULL) goto done;
            PyObject *off = PyNumber_Add(first_index, step);
            Py_DECREF(step);
            if (off == NULL) goto done;
            PyErr_Format(PyExc_ValueError, "a message field does not fit its type: message %zd: "
                         "offset %S does not fit in u64", i, off);
            Py_DECREF(off);
            goto done;
        }
        if (ts_kind) {
            if (ts_kind == 1)
                PyErr_Format(PyExc_ValueError, "a message field does not fit its type: message %zd: "
                             "timestamp must be an int, not %.100s", i, type_name(ts_obj));
            else
                PyErr_Format(PyExc_ValueError, "a message field does not fit its type: message %zd: "
                             "timestamp %S does not fit in u64", i, ts_obj);
            goto done;
        }
        if (origins != NULL) {
            PyObject *o = PySequence_Fast_GET_ITEM(origins, i);
            uint64_t ov; int okind = 0;
            rc = as_u64(o, &ov, &okind);
            if (rc == -2) goto done;
            if (rc == -1) {
                if (okind == 1)
                    PyErr_Format(PyExc_ValueError, "a message field does not fit its type: message %zd: "
                                 "origin timestamp must be an int, not %.100s", i, type_name(o));
                else
                    PyErr_Format(PyExc_ValueError, "a message field does not fit its type: message %zd: "
                                 "origin timestamp %S does not fit in u64", i, o);
                goto done;
            }
        }
        PyObject *p = PySequence_Fast_GET_ITEM(payloads, i);
        if (!is_buffer(p)) {
            PyErr_Format(PyExc_ValueError, "payloads and user headers must be bytes: message %zd: "
                         "payload is %.100s", i, type_name(p));
            goto done;
        }
        Py_ssize_t plen, hlen = 0;
        if (PyBytes_CheckExact(p)) plen = PyBytes_GET_SIZE(p);
        else {
            if (PyObject_GetBuffer(p, &pv, PyBUF_SIMPLE) < 0) goto done;
            plen = pv.len;
            PyBuffer_Release(&pv);
        }
        if (headers != NULL) {
            PyObject *h = PySequence_Fast_GET_ITEM(headers, i);
            if (!is_buffer(h)) {
                PyErr_Format(PyExc_ValueError, "payloads and user headers must be bytes: message %zd: "
                             "user headers are %.100s", i, type_name(h));
                goto done;
            }
            if (PyBytes_CheckExact(h)) hlen = PyBytes_GET_SIZE(h);
            else {
                if (PyObject_GetBuffer(h, &hv, PyBUF_SIMPLE) < 0) goto done;
                hlen = hv.len;
                PyBuffer_Release(&hv);
            }
        }
        total += HEADER_SIZE + plen + hlen;
    }
    if ((unsigned long long)start_position + (unsigned long long)total > MAX_U32) {
        PyErr_Format(PyExc_ValueError, "batch of %zd bytes does not fit a segment", total);
        goto done;
    }
    /* Pass 2: one bytes object, each record written in place and hashed there. */
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) goto done;
    ends = PyList_New(n + 1);
    if (ends == NULL) goto done;
    unsigned char *base = (unsigned char *)PyBytes_AS_STRING(out);
    const unsigned char *idp = ids.buf;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromSsize_t(start_position + pos);
        if (v == NULL) goto done;
        PyList_SET_ITEM(ends, i, v);
        PyObject *p = PySequence_Fast_GET_ITEM(payloads, i);
        const void *pbuf; Py_ssize_t plen; int prel = 0;
        if (PyBytes_CheckExact(p)) { pbuf = PyBytes_AS_STRING(p); plen = PyBytes_GET_SIZE(p); }
        else {
            if (PyObject_GetBuffer(p, &pv, PyBUF_SIMPLE) < 0) goto done;
            pbuf = pv.buf; plen = pv.len; prel = 1;
        }
        const void *hbuf = NULL; Py_ssize_t hlen = 0; int hrel = 0;
        if (headers != NULL) {
            PyObject *h = PySequence_Fast_GET_ITEM(headers, i);
            if (PyBytes_CheckExact(h)) { hbuf = PyBytes_AS_STRING(h); hlen = PyBytes_GET_SIZE(h); }
            else {
                if (PyObject_GetBuffer(h, &hv, PyBUF_SIMPLE) < 0) { if (prel) PyBuffer_Release(&pv); goto done; }
                hbuf = hv.buf; hlen = hv.len; hrel = 1;
            }
        }
        uint64_t origin = timestamp;
        if (origins != NULL) {
            int okind = 0;
            as_u64(PySequence_Fast_GET_ITEM(origins, i), &origin, &okind);
        }
        if (pos + HEADER_SIZE + plen + hlen > total) {  /* a buffer grew between the passes */
            if (prel) PyBuffer_Release(&pv);
            if (hrel) PyBuffer_Release(&hv);
            PyErr_SetString(PyExc_ValueError, "a payload changed size while its batch was built");
            goto done;
        }
        unsigned char *r = base + pos;
        memcpy(r + 8, idp + 16 * i, 16);
        put_u64(r + 24, first + (uint64_t)i);
        put_u64(r + 32, timestamp);
        put_u64(r + 40, origin);
        put_u32(r + 48, (uint32_t)hlen);
        put_u32(r + 52, (uint32_t)plen);
        put_u64(r + 56, 0);
        memcpy(r + HEADER_SIZE, pbuf, plen);
        if (hlen) memcpy(r + HEADER_SIZE + plen, hbuf, hlen);
        if (prel) PyBuffer_Release(&pv);
        if (hrel) PyBuffer_Release(&hv);
        Py_ssize_t size = HEADER_SIZE + plen + hlen;
        put_u64(r, xxh3(r + 8, (size_t)(size - 8)));
        pos += size;
    }
    PyObject *last = PyLong_FromSsize_t(start_position + pos);
    if (last == NULL) goto done;
    PyList_SET_ITEM(ends, n, last);
    result = PyTuple_Pack(2, out, ends);
done:
    PyBuffer_Release(&ids);
    Py_XDECREF(first_index);
    Py_XDECREF(payloads);
    Py_XDECREF(headers);
    Py_XDECREF(origins);
    Py_XDECREF(out);
    Py_XDECREF(ends);
    return result;
}

/* ------------------------------------------------------------------ verify_run */

static PyObject *run_tuple(Py_ssize_t count, Py_ssize_t consumed, long long used, int over, int failed) {
    return Py_BuildValue("(nnLOO)", count, consumed, used, over ? Py_True : Py_False,
                         failed ? Py_True : Py_False);
}

static PyObject *verify_run(PyObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *ends_in, *first_obj, *budget_obj;
    int take_first;
    if (!PyArg_ParseTuple(args, "y*OOOp", &data, &ends_in, &first_obj, &budget_obj, &take_first))
        return NULL;
    PyObject *result = NULL, *ends = NULL;
    Py_ssize_t *pos = NULL;
    Py_buffer view;
    int viewed = 0;
    long long first = PyLong_AsLongLong(first_obj);
    if (first == -1 && PyErr_Occurred()) goto done;
    long long budget = PyLong_AsLongLong(budget_obj);
    if (budget == -1 && PyErr_Occurred()) goto done;
    Py_ssize_t m;
    if (int64_ends(ends_in, &view)) {
        /* ends as 64-bit integers in a buffer (an int64 numpy array or array('q')): read
         * in place, no int object per record (data.log_reads' read_raw(ends_array=True)) */
        viewed = 1;
        m = view.len / 8;
    } else {
        ends = PySequence_Fast(ends_in, "ends must be a sequence");
        if (ends == NULL) goto done;
        m = PySequence_Fast_GET_SIZE(ends);
    }
    if (m == 0) { PyErr_SetString(PyExc_IndexError, "list index out of range"); goto done; }
    pos = PyMem_Malloc(sizeof(Py_ssize_t) * m);
    if (pos == NULL) { PyErr_NoMemory(); goto done; }
    const int64_t *given = viewed ? (const int64_t *)view.buf : NULL;
    Py_ssize_t last = viewed ? (Py_ssize_t)given[m - 1]
                             : PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(ends, m - 1));
    if (last == -1 && PyErr_Occurred()) goto done;
    int short_ = data.len < last;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < m; i++) {  /* a short file: only the ends that lie inside it */
        Py_ssize_t e = viewed ? (Py_ssize_t)given[i]
                              : PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(ends, i));
        if (e == -1 && PyErr_Occurred()) goto done;
        if (!short_ || e <= data.len) pos[k++] = e;
    }
    k -= 1;
    if (k <= 0) { result = run_tuple(0, 0, 0, 0, short_); goto done; }
    const unsigned char *buf = data.buf;
    Py_ssize_t start = 0;
    long long expect = first, used = 0;
    for (Py_ssize_t i = 1; i <= k; i++) {
        Py_ssize_t end = pos[i];
        if (start + HEADER_SIZE > data.len) {
            result = run_tuple(expect - first, start, used, 0, 1); goto done;
        }
        const unsigned char *r = buf + start;
        uint64_t ck = get_u64(r), off = get_u64(r + 24);
        uint64_t uhl = get_u32(r + 48), pl = get_u32(r + 52);
        if ((long long)start + HEADER_SIZE + (long long)pl + (long long)uhl != (long long)end
                || off != (uint64_t)expect || xxh3(r + 8, (size_t)(end - start - 8)) != ck) {
            result = run_tuple(expect - first, start, used, 0, 1); goto done;
        }
        if (used + (long long)pl > budget && (expect != first || !take_first)) {
            result = run_tuple(expect - first, start, used, 1, 0); goto done;
        }
        used += (long long)pl;
        start = end;
        expect += 1;
    }
    result = run_tuple(expect - first, start, used, 0, short_);
done:
    PyBuffer_Release(&data);
    if (viewed) PyBuffer_Release(&view);
    PyMem_Free(pos);
    Py_XDECREF(ends);
    return result;
}

/* ------------------------------------------------------------------ decode_run */

/* decode_run(data, ends, first_offset, out, budget, take_first, record_type): verify_run's
 * checks, and each good record appended to ``out`` as record_type(offset, timestamp, id,
 * origin_timestamp, payload, user_headers) (a tuple subclass, filled in place). */
static PyObject *decode_run(PyObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *ends_in, *out, *budget_obj;
    long long first;
    int take_first;
    PyTypeObject *record_type;
    if (!PyArg_ParseTuple(args, "y*OLO!OpO!", &data, &ends_in, &first, &PyList_Type, &out,
                          &budget_obj, &take_first, &PyType_Type, &record_type))
        return NULL;
    PyObject *result = NULL, *ends = NULL;
    Py_ssize_t *pos = NULL;
    if (!PyType_IsSubtype(record_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple subclass");
        goto done;
    }
    ends = PySequence_Fast(ends_in, "ends must be a sequence");
    if (ends == NULL) goto done;
    long long budget = PyLong_AsLongLong(budget_obj);
    if (budget == -1 && PyErr_Occurred()) goto done;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(ends);
    if (m == 0) { PyErr_SetString(PyExc_IndexError, "list index out of range"); goto done; }
    pos = PyMem_Malloc(sizeof(Py_ssize_t) * m);
    if (pos == NULL) { PyErr_NoMemory(); goto done; }
    Py_ssize_t last = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(ends, m - 1));
    if (last == -1 && PyErr_Occurred()) goto done;
    int short_ = data.len < last;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_ssize_t e = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(ends, i));
        if (e == -1 && PyErr_Occurred()) goto done;
        if (!short_ || e <= data.len) pos[k++] = e;
    }
    if (k == 0) { PyErr_SetNone(PyExc_StopIteration); goto done; }
    const unsigned char *buf = data.buf;
    Py_ssize_t start = 0;
    long long expect = first, used = 0;
    int over = 0, failed = 0;
    Py_ssize_t i;
    for (i = 1; i < k; i++) {
        Py_ssize_t end = pos[i];
        if (start + HEADER_SIZE > data.len) { failed = 1; break; }
        const unsigned char *r = buf + start;
        uint64_t ck = get_u64(r), off = get_u64(r + 24);
        uint64_t uhl = get_u32(r + 48), pl = get_u32(r + 52);
        long long body_end = (long long)start + HEADER_SIZE + (long long)pl;
        if (body_end + (long long)uhl != (long long)end || off != (uint64_t)expect
                || xxh3(r + 8, (size_t)(end - start - 8)) != ck) {
            failed = 1;
            break;
        }
        used += (long long)pl;
        if (used > budget && (expect != first || !take_first)) {
            used -= (long long)pl;
            over = 1;
            break;
        }
        PyObject *rec = record_type->tp_alloc(record_type, 6);
        if (rec == NULL) goto done;
        PyObject *ident = _PyLong_FromByteArray(r + 8, 16, 1, 0);
        PyObject *fields[6] = {
            PyLong_FromUnsignedLongLong(off),
            PyLong_FromUnsignedLongLong(get_u64(r + 32)),
            ident,
            PyLong_FromUnsignedLongLong(get_u64(r + 40)),
            PyBytes_FromStringAndSize((const char *)buf + start + HEADER_SIZE, (Py_ssize_t)pl),
            PyBytes_FromStringAndSize((const char *)buf + body_end, (Py_ssize_t)uhl)};
        int bad = 0;
        for (int f = 0; f < 6; f++) {
            if (fields[f] == NULL) bad = 1;
            else PyTuple_SET_ITEM(rec, f, fields[f]);
        }
        if (bad || PyList_Append(out, rec) < 0) { Py_DECREF(rec); goto done; }
        Py_DECREF(rec);
        start = end;
        expect += 1;
    }
    if (i == k) failed = short_;
    result = run_tuple(expect - first, start, used, over, failed);
done:
    PyBuffer_Release(&data);
    PyMem_Free(pos);
    Py_XDECREF(ends);
    return result;
}

/* ------------------------------------------------------------------ stamp_framed */

/* stamp_framed(messages, ends, first_offset, timestamp, start_position, random_ids): Iggy's
 * SendMessages area stamped in one copy; the checks in the twin's order (each over the
 * whole batch before the next), random_ids(k) called once for the k unset ids. */
static PyObject *stamp_framed(PyObject *self, PyObject *args) {
    Py_buffer msg;
    PyObject *ends_in, *first_obj, *ts_obj, *random_ids;
    long long start_position;
    if (!PyArg_ParseTuple(args, "y*OOOLO", &msg, &ends_in, &first_obj, &ts_obj,
                          &start_position, &random_ids))
        return NULL;
    PyObject *result = NULL, *ends = NULL, *stamped = NULL, *positions = NULL, *fresh = NULL;
    Py_ssize_t *end_at = NULL;
    const unsigned char *buf = msg.buf;
    Py_ssize_t total = msg.len, n = 0;
    if (ends_in == Py_None) {  /* walked from the headers */
        Py_ssize_t pos = 0, cap = 64;
        end_at = PyMem_Malloc(sizeof(Py_ssize_t) * cap);
        if (end_at == NULL) { PyErr_NoMemory(); goto done; }
        while (pos < total) {
            if (pos + HEADER_SIZE > total) {
                PyErr_Format(PyExc_ValueError, "partial header at byte %zd (%zd of %d bytes)",
                             pos, total - pos, HEADER_SIZE);
                goto done;
            }
            pos += HEADER_SIZE + (Py_ssize_t)get_u32(buf + pos + 52) + (Py_ssize_t)get_u32(buf + pos + 48);
            if (n == cap) {
                cap *= 2;
                Py_ssize_t *grown = PyMem_Realloc(end_at, sizeof(Py_ssize_t) * cap);
                if (grown == NULL) { PyErr_NoMemory(); goto done; }
                end_at = grown;
            }
            end_at[n++] = pos;
        }
    } else {
        ends = PySequence_Fast(ends_in, "ends must be a sequence");
        if (ends == NULL) goto done;
        n = PySequence_Fast_GET_SIZE(ends);
        end_at = PyMem_Malloc(sizeof(Py_ssize_t) * (n ? n : 1));
        if (end_at == NULL) { PyErr_NoMemory(); goto done; }
        for (Py_ssize_t i = 0; i < n; i++) {
            end_at[i] = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(ends, i));
            if (end_at[i] == -1 && PyErr_Occurred()) goto done;
        }
    }
    if (n == 0 || total == 0) { PyErr_SetString(PyExc_ValueError, "no messages"); goto done; }
    if (end_at[n - 1] != total) {
        PyErr_Format(PyExc_ValueError, "the messages end at byte %zd; the area has %zd bytes",
                     end_at[n - 1], total);
        goto done;
    }
    {   /* offsets and timestamp: the twin's messages, with Python's own numbers */
        PyObject *last_off = NULL, *step = PyLong_FromSsize_t(n - 1);
        if (step == NULL) goto done;
        last_off = PyNumber_Add(first_obj, step);
        Py_DECREF(step);
        if (last_off == NULL) goto done;
        uint64_t l; int kind = 0;
        PyObject *zero_obj = PyLong_FromLong(0);
        if (zero_obj == NULL) { Py_DECREF(last_off); goto done; }
        int neg = PyObject_RichCompareBool(first_obj, zero_obj, Py_LT);
        Py_DECREF(zero_obj);
        if (neg < 0 || as_u64(last_off, &l, &kind) == -2) { Py_DECREF(last_off); goto done; }
        if (neg || kind) {
            PyErr_Format(PyExc_ValueError, "offset %S does not fit in u64", last_off);
            Py_DECREF(last_off);
            goto done;
        }
        Py_DECREF(last_off);
    }
    uint64_t first = PyLong_AsUnsignedLongLong(first_obj);
    if (first == (uint64_t)-1 && PyErr_Occurred()) goto done;
    uint64_t timestamp; int ts_kind = 0;
    int rc = as_u64(ts_obj, &timestamp, &ts_kind);
    if (rc == -2) goto done;
    if (rc == -1) {
        PyErr_Format(PyExc_ValueError, "timestamp %S does not fit in u64", ts_obj);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t start = i ? end_at[i - 1] : 0;
        if (start + HEADER_SIZE > end_at[i]) {
            PyErr_Format(PyExc_ValueError, "a message header is cut short: message %zd spans "
                         "bytes %zd-%zd", i, start, end_at[i]);
            goto done;
        }
    }
    Py_ssize_t unset = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *r = buf + (i ? end_at[i - 1] : 0);
        if ((i ? end_at[i - 1] : 0) + HEADER_SIZE + (Py_ssize_t)get_u32(r + 48)
                + (Py_ssize_t)get_u32(r + 52) != end_at[i]) {
            PyErr_SetString(PyExc_ValueError, "a message's payload and user header lengths "
                            "disagree with its end position");
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *r = buf + (i ? end_at[i - 1] : 0);
        if (get_u64(r + 56)) {
            PyErr_SetString(PyExc_ValueError, "a message's reserved field is not 0");
            goto done;
        }
        if (get_u64(r + 8) == 0 && get_u64(r + 16) == 0) unset++;
    }
    stamped = PyByteArray_FromStringAndSize((const char *)buf, total);
    if (stamped == NULL) goto done;
    unsigned char *w = (unsigned char *)PyByteArray_AS_STRING(stamped);
    const unsigned char *ids = NULL;
    if (unset) {
        fresh = PyObject_CallFunction(random_ids, "n", unset);
        if (fresh == NULL) goto done;
        if (!PyBytes_Check(fresh) || PyBytes_GET_SIZE(fresh) != 16 * unset) {
            PyErr_SetString(PyExc_ValueError, "random_ids gave the wrong bytes");
            goto done;
        }
        ids = (const unsigned char *)PyBytes_AS_STRING(fresh);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t start = i ? end_at[i - 1] : 0;
        unsigned char *r = w + start;
        if (ids != NULL && get_u64(r + 8) == 0 && get_u64(r + 16) == 0) {
            memcpy(r + 8, ids, 16);
            ids += 16;
        }
        put_u64(r + 24, first + (uint64_t)i);
        put_u64(r + 32, timestamp);
        put_u64(r + 0, xxh3(r + 8, (size_t)(end_at[i] - start - 8)));
    }
    if ((unsigned long long)start_position + (unsigned long long)total > MAX_U32) {
        PyErr_Format(PyExc_ValueError, "batch of %zd bytes does not fit a segment", total);
        goto done;
    }
    positions = PyList_New(n + 1);
    if (positions == NULL) goto done;
    PyObject *zero = PyLong_FromLongLong(start_position);
    if (zero == NULL) goto done;
    PyList_SET_ITEM(positions, 0, zero);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLongLong(start_position + end_at[i]);
        if (v == NULL) goto done;
        PyList_SET_ITEM(positions, i + 1, v);
    }
    result = PyTuple_Pack(2, stamped, positions);
done:
    PyBuffer_Release(&msg);
    PyMem_Free(end_at);
    Py_XDECREF(ends);
    Py_XDECREF(stamped);
    Py_XDECREF(positions);
    Py_XDECREF(fresh);
    return result;
}

/* ------------------------------------------------------------------ consume_items */

static Py_ssize_t decimal_len(unsigned long long v) {
    Py_ssize_t n = 1;
    while (v >= 10) { v /= 10; n++; }
    return n;
}

static PyObject *consume_items(PyObject *self, PyObject *args) {
    Py_buffer raw;
    PyObject *ends_in;
    long long first;
    if (!PyArg_ParseTuple(args, "y*OL", &raw, &ends_in, &first)) return NULL;
    PyObject *ends = NULL, *out = NULL;
    Py_ssize_t *starts = NULL;
    uint32_t *lens = NULL;
    ends = PySequence_Fast(ends_in, "ends must be a sequence");
    if (ends == NULL) goto done;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(ends);
    if (first < 0) {
        PyErr_Format(PyExc_ValueError, "first offset %lld is negative", first);
        goto done;
    }
    starts = PyMem_Malloc(sizeof(Py_ssize_t) * (k + 1));
    lens = PyMem_Malloc(sizeof(uint32_t) * (k + 1));
    if (starts == NULL || lens == NULL) { PyErr_NoMemory(); goto done; }
    const unsigned char *buf = raw.buf;
    Py_ssize_t total = k ? k - 1 : 0;
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        if (start < 0 || start + HEADER_SIZE > raw.len) {
            PyErr_Format(PyExc_ValueError, "record %zd runs past the data", i);
            goto done;
        }
        uint32_t pl = get_u32(buf + start + 52);
        if (start + HEADER_SIZE + (Py_ssize_t)pl > raw.len) {
            PyErr_Format(PyExc_ValueError, "record %zd runs past the data", i);
            goto done;
        }
        starts[i] = start;
        lens[i] = pl;
        total += decimal_len((unsigned long long)(first + i)) + 1 + pl;
        Py_ssize_t e = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(ends, i));
        if (e == -1 && PyErr_Occurred()) goto done;
        start = e;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) goto done;
    char *w = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < k; i++) {
        if (i) *w++ = ',';
        char digits[24];
        unsigned long long v = (unsigned long long)(first + i);
        int d = 0;
        do { digits[d++] = (char)('0' + v % 10); v /= 10; } while (v);
        while (d) *w++ = digits[--d];
        *w++ = ':';
        memcpy(w, buf + starts[i] + HEADER_SIZE, lens[i]);
        w += lens[i];
    }
done:
    PyBuffer_Release(&raw);
    PyMem_Free(starts);
    PyMem_Free(lens);
    Py_XDECREF(ends);
    if (PyErr_Occurred()) { Py_XDECREF(out); return NULL; }
    return out;
}

/* ------------------------------------------------------------------ record_heads */

/* record_heads(data, start, end, out): walk the records of data[start:end] by their length
 * fields and write the header fields of record i into the writable buffer ``out``, read as
 * 7 columns of ``cap = len(out) // 56`` u64 each: out[c * cap + i] for column c = position,
 * checksum, offset, timestamp, user_headers_length, payload_length, reserved. Stops at a
 * record that would run past ``end`` (clamped to len(data): a partial tail) or after
 * ``cap`` records. Returns the number of records written. */
static PyObject *record_heads(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nnw*", &data, &start, &end, &out)) return NULL;
    if (start < 0) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "start must not be negative");
        return NULL;
    }
    if (end > data.len) end = data.len;
    Py_ssize_t cap = out.len / 56, n = 0, pos = start;
    uint64_t *col = out.buf;
    const unsigned char *buf = data.buf;
    while (n < cap && pos <= end - HEADER_SIZE) {
        const unsigned char *r = buf + pos;
        uint64_t uhl = get_u32(r + 48), pl = get_u32(r + 52);
        uint64_t next = (uint64_t)pos + HEADER_SIZE + uhl + pl;
        if (next > (uint64_t)end) break;
        uint64_t row[7] = {(uint64_t)pos, get_u64(r), get_u64(r + 24), get_u64(r + 32), uhl, pl,
                           get_u64(r + 56)};
        for (int c = 0; c < 7; c++) {  /* little-endian u64 columns, as numpy's "<u8" */
            put_u64((unsigned char *)(col + c * cap + n), row[c]);
        }
        n++;
        pos = (Py_ssize_t)next;
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    return PyLong_FromSsize_t(n);
}

/* ------------------------------------------------------------------ scan_stamped */

/* scan_stamped(data, first_offset, start_position) -> (ends, max_timestamp, first_timestamp):
 * already-stamped records (a follower copying its leader) checked for append_records:
 * complete, reserved == 0, offsets dense from first_offset, XXH3 right. ``ends`` is a list
 * of start_position + each record's start, then start_position + len(data). ValueError
 * naming the first problem, worded as the Python twin words it. */
static PyObject *scan_stamped(PyObject *self, PyObject *args) {
    Py_buffer data;
    long long first, start_position;
    if (!PyArg_ParseTuple(args, "y*LL", &data, &first, &start_position)) return NULL;
    PyObject *ends = NULL, *result = NULL;
    const unsigned char *buf = data.buf;
    Py_ssize_t total = data.len, pos = 0;
    long long expect = first;
    uint64_t max_ts = 0, first_ts = 0;
    if (total == 0) { PyErr_SetString(PyExc_ValueError, "no records"); goto done; }
    ends = PyList_New(0);
    if (ends == NULL) goto done;
#define SCAN_FAIL(...) do { \
        PyObject *why = PyUnicode_FromFormat(__VA_ARGS__); \
        if (why != NULL) { \
            PyErr_Format(PyExc_ValueError, "record at byte %zd (offset %lld expected): %U", \
                         pos, expect, why); \
            Py_DECREF(why); \
        } \
        goto done; \
    } while (0)
    while (pos < total) {
        if (pos + HEADER_SIZE > total)
            SCAN_FAIL("partial header (%zd of %d bytes)", total - pos, HEADER_SIZE);
        const unsigned char *r = buf + pos;
        uint64_t ck = get_u64(r), off = get_u64(r + 24), ts = get_u64(r + 32);
        uint64_t uhl = get_u32(r + 48), pl = get_u32(r + 52), rsv = get_u64(r + 56);
        long long end = (long long)pos + HEADER_SIZE + (long long)pl + (long long)uhl;
        if (rsv) {
            char text[24];
            snprintf(text, sizeof text, "%llu", (unsigned long long)rsv);
            SCAN_FAIL("reserved field is %s, must be 0", text);
        }
        if (end > total)
            SCAN_FAIL("bad length or partial record (needs %lld bytes, %zd present)",
                      end - (long long)pos, total - pos);
        if (off != (uint64_t)expect) {
            char text[24];
            snprintf(text, sizeof text, "%llu", (unsigned long long)off);
            SCAN_FAIL("offset field is %s, expected %lld", text, expect);
        }
        if (xxh3(r + 8, (size_t)(end - pos - 8)) != ck) SCAN_FAIL("checksum mismatch");
        PyObject *at = PyLong_FromLongLong(start_position + (long long)pos);
        if (at == NULL || PyList_Append(ends, at) < 0) { Py_XDECREF(at); goto done; }
        Py_DECREF(at);
        if (expect == first) first_ts = ts;
        if (ts > max_ts || expect == first) max_ts = ts;
        expect += 1;
        pos = (Py_ssize_t)end;
    }
#undef SCAN_FAIL
    if ((unsigned long long)(start_position + total) > MAX_U32) {
        PyErr_Format(PyExc_ValueError, "batch of %zd bytes does not fit a segment", total);
        goto done;
    }
    {
        PyObject *last = PyLong_FromLongLong(start_position + (long long)total);
        if (last == NULL || PyList_Append(ends, last) < 0) { Py_XDECREF(last); goto done; }
        Py_DECREF(last);
    }
    result = Py_BuildValue("(OKK)", ends, (unsigned long long)max_ts,
                           (unsigned long long)first_ts);
done:
    PyBuffer_Release(&data);
    Py_XDECREF(ends);
    return result;
}

/* ------------------------------------------------------------------ producer_runs */

/* producer_runs(data) -> (runs, count, end): the batches of Kafka idempotent producers in
 * stored records (their ids carry the producer fields, data/idempotence.py), one tuple per
 * run of records that continue each other:
 *   (first_offset, last_offset, producer_id, epoch, first_seq, last_seq, starts, ends,
 *    timestamp of the run's last record)
 * ``count`` records were read, ``end`` is the last one's offset + 1 (0 for none). Records
 * without a producer id only count. ValueError for a partial record. */
#define PR_MARK 0x1A5u
static PyObject *producer_runs(PyObject *self, PyObject *arg) {
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *buf = data.buf;
    Py_ssize_t total = data.len, pos = 0, count = 0;
    PyObject *runs = PyList_New(0), *result = NULL;
    uint64_t end = 0;
    /* the open run */
    int open = 0, r_first = 0, r_last = 0;
    uint64_t r_fo = 0, r_lo = 0, r_pid = 0, r_ts = 0;
    uint32_t r_epoch = 0, r_fs = 0, r_ls = 0;
    if (runs == NULL) goto done;
#define PR_CLOSE() do { \
        PyObject *run = Py_BuildValue("(KKKIIIOOK)", (unsigned long long)r_fo, \
            (unsigned long long)r_lo, (unsigned long long)r_pid, r_epoch, r_fs, r_ls, \
            r_first ? Py_True : Py_False, r_last ? Py_True : Py_False, \
            (unsigned long long)r_ts); \
        if (run == NULL || PyList_Append(runs, run) < 0) { Py_XDECREF(run); goto done; } \
        Py_DECREF(run); \
        open = 0; \
    } while (0)
    while (pos < total) {
        if (total - pos < HEADER_SIZE) {
            PyErr_Format(PyExc_ValueError, "partial record header at byte %zd", pos);
            goto done;
        }
        const unsigned char *r = buf + pos;
        uint64_t lo = get_u64(r + 8), hi = get_u64(r + 16);
        uint64_t off = get_u64(r + 24), ts = get_u64(r + 32);
        uint64_t len = (uint64_t)get_u32(r + 48) + get_u32(r + 52);
        if (len > (uint64_t)(total - pos - HEADER_SIZE)) {
            PyErr_Format(PyExc_ValueError, "partial record at byte %zd", pos);
            goto done;
        }
        pos += HEADER_SIZE + (Py_ssize_t)len;
        count++;
        end = off + 1;
        int marked = ((hi >> 12) & 0xF) == 8 && (lo >> 62) == 2 && (hi >> 55) == PR_MARK;
        if (!marked) {
            if (open) PR_CLOSE();
            continue;
        }
        int last = (int)(lo & 1), first = (int)((lo >> 1) & 1);
        uint32_t seq = (uint32_t)((lo >> 2) & 0x7FFFFFFFu);
        uint32_t epoch = (uint32_t)((lo >> 33) & 0xFFFFu);
        uint64_t pid = ((lo >> 49) & 0x1FFFu) | (hi & 0xFFFu) << 13
                       | ((hi >> 16) & ((1ull << 39) - 1)) << 25;
        if (open && (first || pid != r_pid || epoch != r_epoch || off != r_lo + 1
                     || seq != ((r_ls + 1) & 0x7FFFFFFFu)))
            PR_CLOSE();
        if (!open) {
            open = 1;
            r_first = first;
            r_fo = off; r_pid = pid; r_epoch = epoch; r_fs = seq;
        }
        r_lo = off; r_ls = seq; r_ts = ts; r_last = last;
        if (last) PR_CLOSE();
    }
    if (open) PR_CLOSE();
#undef PR_CLOSE
    result = Py_BuildValue("(OnK)", runs, count, (unsigned long long)end);
done:
    PyBuffer_Release(&data);
    Py_XDECREF(runs);
    return result;
}

/* ------------------------------------------------------------------ module */

/* keyed_headers(keys, by_key, tail, first): each message's user headers, by key. Without
   tail (None): by_key[keys[i]] (the same bytes object, not a copy). With tail (bytes):
   by_key[keys[i]] + tail + (first + i) as a little-endian u64 (an idempotent V1 producer's
   key, pid and seq headers). KeyError for a key not in by_key, OverflowError for a number
   past 2**64 - 1. See data.format._keyed_headers_py, the reference. */
static PyObject *keyed_headers(PyObject *self, PyObject *args) {
    PyObject *keys_in, *by_key, *tail, *first_in;
    if (!PyArg_ParseTuple(args, "OO!OO!", &keys_in, &PyDict_Type, &by_key, &tail,
                          &PyLong_Type, &first_in))
        return NULL;
    if (tail != Py_None && !PyBytes_Check(tail)) {
        PyErr_SetString(PyExc_TypeError, "tail must be bytes or None");
        return NULL;
    }
    PyObject *keys = PySequence_Fast(keys_in, "keys must be a sequence");
    if (keys == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(keys);
    unsigned long long first = 0;
    if (tail != Py_None) {
        first = PyLong_AsUnsignedLongLong(first_in);  /* fails below 0 and past 2**64 - 1 */
        int bad = first == (unsigned long long)-1 && PyErr_Occurred();
        if (bad) PyErr_Clear();
        if (bad || (n > 0 && first + (unsigned long long)(n - 1) < first)) {
            Py_DECREF(keys);
            PyErr_SetString(PyExc_OverflowError, "sequence number outside 0 .. 2**64 - 1");
            return NULL;
        }
    }
    PyObject *out = PyList_New(n);
    if (out == NULL) { Py_DECREF(keys); return NULL; }
    const char *tail_buf = tail == Py_None ? NULL : PyBytes_AS_STRING(tail);
    Py_ssize_t tail_len = tail == Py_None ? 0 : PyBytes_GET_SIZE(tail);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PySequence_Fast_GET_ITEM(keys, i);
        PyObject *head = PyDict_GetItemWithError(by_key, key);
        if (head == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
            goto fail;
        }
        if (tail == Py_None) {
            Py_INCREF(head);
            PyList_SET_ITEM(out, i, head);
            continue;
        }
        if (!PyBytes_Check(head)) {
            PyErr_SetString(PyExc_TypeError, "by_key values must be bytes");
            goto fail;
        }
        Py_ssize_t head_len = PyBytes_GET_SIZE(head);
        PyObject *item = PyBytes_FromStringAndSize(NULL, head_len + tail_len + 8);
        if (item == NULL) goto fail;
        char *w = PyBytes_AS_STRING(item);
        memcpy(w, PyBytes_AS_STRING(head), head_len);
        memcpy(w + head_len, tail_buf, tail_len);
        unsigned long long v = first + (unsigned long long)i;
        for (int b = 0; b < 8; b++) w[head_len + tail_len + b] = (char)((v >> (8 * b)) & 0xFF);
        PyList_SET_ITEM(out, i, item);
    }
    Py_DECREF(keys);
    return out;
fail:
    Py_DECREF(keys);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"fnv1a_32", fnv1a_32, METH_O, "FNV-1a, 32 bits, over a bytes-like object."},
    {"build_records", build_records, METH_VARARGS,
     "Stamp a batch of records: (record bytes, ends). See data.writer._build_records_py."},
    {"verify_run", verify_run, METH_VARARGS,
     "(count, consumed, payload, over_budget, failed). See data.reader._verify_run_py."},
    {"decode_run", decode_run, METH_VARARGS,
     "verify_run that also appends Record tuples to out. See data.reader._decode_run_py."},
    {"stamp_framed", stamp_framed, METH_VARARGS,
     "Stamp Iggy's already-framed messages. See data.writer._stamp_framed_py."},
    {"consume_items", consume_items, METH_VARARGS,
     "b','.join(b'%d:%b' % (offset, payload)). See data.format._consume_items_py."},
    {"record_heads", record_heads, METH_VARARGS,
     "Header fields of the records of data[start:end] as columns. See data.spark.records._record_heads_py."},
    {"scan_stamped", scan_stamped, METH_VARARGS,
     "(ends, max_timestamp, first_timestamp) of stamped records. See data.writer._scan_stamped_py."},
    {"producer_runs", producer_runs, METH_O,
     "(runs, count, end) of idempotent producers' batches. See data.idempotence._producer_runs_py."},
    {"keyed_headers", keyed_headers, METH_VARARGS,
     "Each message's user headers by key (+ tail + u64 counter). See data.format._keyed_headers_py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "data._cspeedups",
    "The compiled twin of Skerry's per-message loops (see data/speedups.py).", -1, methods,
};

static int find_xxh3(void) {
    PyObject *mod = PyImport_ImportModule("xxhash._xxhash");
    if (mod == NULL) return -1;
    PyObject *file = PyObject_GetAttrString(mod, "__file__");
    Py_DECREF(mod);
    if (file == NULL) return -1;
    const char *path = PyUnicode_AsUTF8(file);
    if (path == NULL) { Py_DECREF(file); return -1; }
    void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (handle == NULL) handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    Py_DECREF(file);
    if (handle != NULL) xxh3 = (xxh3_fn)dlsym(handle, "XXH3_64bits");
    if (xxh3 == NULL) {
        PyErr_SetString(PyExc_ImportError, "xxhash's extension does not export XXH3_64bits");
        return -1;
    }
    /* XXH3-64 of "abc", seed 0: the checksum every record on disk carries. */
    if (xxh3("abc", 3) != 0x78AF5F94892F3950ull) {
        xxh3 = NULL;
        PyErr_SetString(PyExc_ImportError, "xxhash's XXH3_64bits gives an unexpected digest");
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__cspeedups(void) {
    if (find_xxh3() < 0) return NULL;
    return PyModule_Create(&module);
}
