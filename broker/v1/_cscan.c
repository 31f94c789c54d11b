/* broker.v1._cscan: the compiled twin of the V1 PRODUCE fast path's scan over a read.
 *
 *   scan_produce(buffer, pos, most, max_line, max_value) -> (run, pos)
 *   fill_produce_ok(tokens, partition, first_offset, hw)   (see below)
 *   split_batch(data, max_value) -> (keys, values) or None  (see below)
 *
 * The reference is broker/v1/codec.py's _scan_produce_py (PRODUCE_LINE_RE matched again and
 * again from ``pos``, then Codec.match_produce's checks and the framer's length limit):
 * at most ``most`` plain PRODUCE lines from ``pos``, each as (cid, topic, key, value, acks,
 * start) with acks "0", "1" or "all", stopping at the first line that is not that shape,
 * past the limits, or at the end of the buffer; ``pos`` after the last one taken.
 * data/speedups.py decides whether this module runs (SKERRY_NO_EXTENSIONS=1: never);
 * tests/v1/test_scan_equivalence.py holds it to the reference on arbitrary bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "_produce_line.h"

static PyObject *acks_0, *acks_1, *acks_all;

static PyObject *scan_produce(PyObject *self, PyObject *args) {
    PyObject *buffer;
    Py_ssize_t pos, most, max_line, max_value;
    if (!PyArg_ParseTuple(args, "O!nnnn", &PyBytes_Type, &buffer, &pos, &most, &max_line,
                          &max_value))
        return NULL;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(buffer);
    Py_ssize_t size = PyBytes_GET_SIZE(buffer);
    PyObject *run = PyList_New(0);
    if (run == NULL) return NULL;
    if (pos < 0) pos = 0;
    struct produce_line f;
    for (Py_ssize_t taken = 0; taken < most && pos < size; taken++) {
        Py_ssize_t end = match_produce_line(b, size, pos, max_line, max_value, &f);
        if (end < 0) break;
        PyObject *acks = f.acks == ACKS_0 ? acks_0 : f.acks == ACKS_ALL ? acks_all : acks_1;
        PyObject *item = PyTuple_New(6);
        if (item == NULL) { Py_DECREF(run); return NULL; }
        PyObject *fields[6] = {
            PyBytes_FromStringAndSize((const char *)b + f.cid0, f.cid1 - f.cid0),
            PyBytes_FromStringAndSize((const char *)b + f.topic0, f.topic1 - f.topic0),
            PyBytes_FromStringAndSize((const char *)b + f.key0, f.key1 - f.key0),
            PyBytes_FromStringAndSize((const char *)b + f.value0, f.value1 - f.value0),
            acks, PyLong_FromSsize_t(pos)};
        Py_INCREF(acks);
        int failed = 0;
        for (int i = 0; i < 6; i++) {
            if (fields[i] == NULL) failed = 1;
            else PyTuple_SET_ITEM(item, i, fields[i]);
        }
        if (failed || PyList_Append(run, item) < 0) {
            Py_DECREF(item);
            Py_DECREF(run);
            return NULL;
        }
        Py_DECREF(item);
        pos = end;
    }
    return Py_BuildValue("(Nn)", run, pos);
}

/* fill_produce_ok(tokens, partition, first_offset, hw): token i (a list [reply, cid, ...])
 * gets reply b"V1|<cid>|OK|partition=<p> offset=<first_offset + i> hw=<hw>\n" in its item 0.
 * The reference is broker/v1/replies.py's _fill_produce_ok_py. */
static PyObject *fill_produce_ok(PyObject *self, PyObject *args) {
    PyObject *tokens_in;
    long long partition, first, hw;
    if (!PyArg_ParseTuple(args, "OLLL", &tokens_in, &partition, &first, &hw)) return NULL;
    PyObject *tokens = PySequence_Fast(tokens_in, "tokens must be a sequence");
    if (tokens == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(tokens);
    /* Only the offset changes along the run: the rest of the line is formatted once. */
    struct produce_ok_parts parts;
    produce_ok_parts(&parts, partition, hw);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *token = PySequence_Fast_GET_ITEM(tokens, i);
        Py_buffer cid;
        if (!PyList_Check(token) || PyList_GET_SIZE(token) < 2
                || PyObject_GetBuffer(PyList_GET_ITEM(token, 1), &cid, PyBUF_SIMPLE) < 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "token %zd is not a [reply, cid bytes, ...] list", i);
            Py_DECREF(tokens);
            return NULL;
        }
        PyObject *reply = produce_ok_reply(&parts, cid.buf, cid.len, first + (long long)i);
        if (reply == NULL) { PyBuffer_Release(&cid); Py_DECREF(tokens); return NULL; }
        PyBuffer_Release(&cid);
        PyObject *old = PyList_GET_ITEM(token, 0);
        PyList_SET_ITEM(token, 0, reply);
        Py_XDECREF(old);
    }
    Py_DECREF(tokens);
    Py_RETURN_NONE;
}

/* split_batch(data, max_value): a PRODUCE_BATCH batch (u32 count, count u8 key lengths,
 * count u32 value lengths, the keys, the values; little-endian) cut into a tuple of keys
 * and a tuple of values, as broker/v1/codec/parse.py's _decode_batch_py does. None when
 * the batch breaks any of that function's rules: the caller then runs the twin, which
 * raises the very BadRequest (so the errors have one spelling, in Python). */
static PyObject *split_batch(PyObject *self, PyObject *args) {
    Py_buffer data;
    long long max_value;
    if (!PyArg_ParseTuple(args, "y*L", &data, &max_value)) return NULL;
    const unsigned char *b = data.buf;
    Py_ssize_t size = data.len, count, head, total, pos;
    PyObject *keys = NULL, *values = NULL, *result = NULL;
    if (size < 4) goto twin;
    count = (Py_ssize_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
    if (count == 0 || count > (size - 4) / 5) goto twin;
    head = 4 + 5 * count;
    total = head;
    for (Py_ssize_t i = 0; i < count; i++) total += b[4 + i];
    const unsigned char *lens = b + 4 + count;
    for (Py_ssize_t i = 0; i < count; i++, lens += 4) {
        uint32_t v = (uint32_t)lens[0] | (uint32_t)lens[1] << 8 | (uint32_t)lens[2] << 16 | (uint32_t)lens[3] << 24;
        if ((long long)v > max_value) goto twin;
        total += v;
        if (total > size) goto twin;
    }
    if (total != size) goto twin;
    keys = PyTuple_New(count);
    values = PyTuple_New(count);
    if (keys == NULL || values == NULL) goto done;
    pos = head;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)b + pos, b[4 + i]);
        if (key == NULL) goto done;
        PyTuple_SET_ITEM(keys, i, key);
        pos += b[4 + i];
    }
    lens = b + 4 + count;
    for (Py_ssize_t i = 0; i < count; i++, lens += 4) {
        Py_ssize_t v = (Py_ssize_t)((uint32_t)lens[0] | (uint32_t)lens[1] << 8 | (uint32_t)lens[2] << 16 | (uint32_t)lens[3] << 24);
        PyObject *value = PyBytes_FromStringAndSize((const char *)b + pos, v);
        if (value == NULL) goto done;
        PyTuple_SET_ITEM(values, i, value);
        pos += v;
    }
    result = PyTuple_Pack(2, keys, values);
    goto done;
twin:
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&data);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    return result;
}

static PyMethodDef methods[] = {
    {"fill_produce_ok", fill_produce_ok, METH_VARARGS,
     "Fill a run of PRODUCE slots with their OK replies. See broker.v1.replies._fill_produce_ok_py."},
    {"scan_produce", scan_produce, METH_VARARGS,
     "(run, pos): the plain PRODUCE lines from pos. See broker.v1.codec._scan_produce_py."},
    {"split_batch", split_batch, METH_VARARGS,
     "(keys, values) of a PRODUCE_BATCH batch, or None. See broker.v1.codec.parse._decode_batch_py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "broker.v1._cscan",
    "The compiled twin of the V1 PRODUCE fast path's scan (see data/speedups.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__cscan(void) {
    produce_line_tables();
    acks_0 = PyUnicode_InternFromString("0");
    acks_1 = PyUnicode_InternFromString("1");
    acks_all = PyUnicode_InternFromString("all");
    if (acks_0 == NULL || acks_1 == NULL || acks_all == NULL) return NULL;
    return PyModule_Create(&module);
}
