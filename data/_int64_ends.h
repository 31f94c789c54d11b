/* data/_int64_ends.h: one helper shared by the compiled loops (data._cspeedups and
 * broker.kafka._cfetch): record ends handed over as an int64 buffer (data.log_reads'
 * read_raw(ends_array=True), numpy's int64) instead of a list. Included, not linked:
 * each extension is its own shared object. */
#ifndef SKERRY_INT64_ENDS_H
#define SKERRY_INT64_ENDS_H

#include <Python.h>

/* True (and ``view`` filled, to release) when ``obj`` is a C-contiguous buffer of 64-bit
 * signed integers ('q', or 'l' where long is 64 bits: numpy's int64); false, with no error
 * set, for anything else (a list: the caller takes the sequence path). */
static int int64_ends(PyObject *obj, Py_buffer *view) {
    if (PyList_CheckExact(obj) || !PyObject_CheckBuffer(obj)) return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return 0;
    }
    const char *f = view->format;
    if (f != NULL && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f++;
    if (view->itemsize == 8 && f != NULL && f[1] == 0
            && (f[0] == 'q' || (f[0] == 'l' && sizeof(long) == 8)))
        return 1;
    PyBuffer_Release(view);
    return 0;
}

#endif
