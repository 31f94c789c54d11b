/* broker.v1._clane: the V1 read lane, request/response PRODUCE without Python per request.
 *
 * A request/response client (one PRODUCE, wait for its OK, the next) costs the broker a
 * reactor event, a recv, the framer, a request object, a callback and a send per message,
 * all in Python (docs/performance.md, "(d) and (e)"). The lane takes the common case of a
 * whole reactor turn at once, in C: for every readable connection that has nothing in
 * flight and nothing buffered (registered "clean" by broker.v1.protocol), one recv; a read
 * that is exactly one plain PRODUCE line (the same match as scan_produce,
 * _produce_line.h) becomes a reply slot in a group of the turn (one per topic and acks),
 * which broker.v1.lane hands to the core's one produce door (one call a group, not one a
 * request). The answer comes back as one call too (``answer``): every reply formatted and,
 * for a connection still waiting for just that reply, sent with one send(2).
 *
 * Everything else stays on the connection's own path, and the lane only gives up the
 * connection: a read that is anything but one plain PRODUCE is handed back as bytes (the
 * reactor gives them to dataReceived); an event on a connection whose reply is still
 * awaited first puts that reply's slot into the connection's queue (``_pending``), so
 * replies keep request order; a reply the socket does not take whole goes to the
 * connection's write path. A connection taken off the lane ("dirty") comes back once the
 * protocol says it is clean again (``settle``).
 *
 *   Lane(selectables, max_line, max_value)
 *   settle(fd, protocol, transport, pending)   clean again (or first registration)
 *   forget(fd, protocol)                       the connection is gone
 *   busy(fd) -> bool                           a reply awaited on the lane
 *   take(events, now, accept, stamp[, owners]) -> (rest, reads, groups)
 *   answer(tokens, partition, first_offset, hw) -> [(protocol, rest bytes | None)]
 *   deliver(tokens) -> [(protocol, rest bytes | None)]
 *   taken() -> (taken, queued)                 requests taken; slots put in a queue
 *
 * Its reference is the connection's own path (broker.v1.protocol.V1Protocol.dataReceived):
 * tests/v1/test_read_lane.py plays the same conversations with the lane on and off and
 * holds the replies to the same bytes. data/speedups.py decides whether it runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "_produce_line.h"

#define READ_BYTES 65536
#define MAX_GROUPS 8
#define EV_IN 0x001 /* EPOLLIN */

enum { FREE = 0, CLEAN, INFLIGHT, DIRTY };

typedef struct {
    PyObject *proto;     /* the V1Protocol (strong) */
    PyObject *transport; /* its transport (strong): checked against the reactor's map */
    PyObject *pending;   /* its reply queue, a deque (strong) */
    PyObject *token;     /* the slot awaited on the lane (strong, INFLIGHT only) */
    unsigned long long gen;
    int state;
} entry_t;

typedef struct {
    PyObject_HEAD
    entry_t *entries;
    Py_ssize_t cap;
    PyObject *selectables; /* the reactor's fd -> selectable dict */
    Py_ssize_t max_line, max_value;
    unsigned long long next_gen;
    unsigned long long taken;  /* requests taken on the lane, for the log */
    unsigned long long queued; /* of those, slots put into a connection's queue */
    unsigned char *buf;
} Lane;

static PyObject *acks_0, *acks_1, *acks_all, *str_append, *str_last_active;

static void entry_clear(entry_t *e) {
    Py_CLEAR(e->proto);
    Py_CLEAR(e->transport);
    Py_CLEAR(e->pending);
    Py_CLEAR(e->token);
    e->state = FREE;
}

static int Lane_init(Lane *self, PyObject *args, PyObject *kwds) {
    PyObject *selectables;
    Py_ssize_t max_line, max_value;
    if (!PyArg_ParseTuple(args, "O!nn", &PyDict_Type, &selectables, &max_line, &max_value))
        return -1;
    Py_INCREF(selectables);
    Py_XSETREF(self->selectables, selectables);
    self->max_line = max_line;
    self->max_value = max_value;
    if (self->buf == NULL) {
        self->buf = PyMem_Malloc(READ_BYTES);
        if (self->buf == NULL) { PyErr_NoMemory(); return -1; }
    }
    return 0;
}

static void Lane_dealloc(Lane *self) {
    for (Py_ssize_t i = 0; i < self->cap; i++) entry_clear(&self->entries[i]);
    PyMem_Free(self->entries);
    PyMem_Free(self->buf);
    Py_XDECREF(self->selectables);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static entry_t *entry_at(Lane *self, long fd, int grow) {
    if (fd < 0) return NULL;
    if (fd >= self->cap) {
        if (!grow) return NULL;
        Py_ssize_t cap = self->cap ? self->cap : 64;
        while (cap <= fd) cap *= 2;
        entry_t *more = PyMem_Realloc(self->entries, cap * sizeof(entry_t));
        if (more == NULL) { PyErr_NoMemory(); return NULL; }
        memset(more + self->cap, 0, (cap - self->cap) * sizeof(entry_t));
        self->entries = more;
        self->cap = cap;
    }
    return &self->entries[fd];
}

static PyObject *Lane_settle(Lane *self, PyObject *args) {
    long fd;
    PyObject *proto, *transport, *pending;
    if (!PyArg_ParseTuple(args, "lOOO", &fd, &proto, &transport, &pending)) return NULL;
    entry_t *e = entry_at(self, fd, 1);
    if (e == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    if (e->state == FREE || e->proto != proto) {
        entry_clear(e);
        Py_INCREF(proto);
        Py_INCREF(transport);
        Py_INCREF(pending);
        e->proto = proto;
        e->transport = transport;
        e->pending = pending;
        e->gen = ++self->next_gen & 0xffffffffULL;
        e->state = CLEAN;
    } else if (e->state == DIRTY) {
        e->state = CLEAN;
    }
    Py_RETURN_NONE;
}

static PyObject *Lane_forget(Lane *self, PyObject *args) {
    long fd;
    PyObject *proto;
    if (!PyArg_ParseTuple(args, "lO", &fd, &proto)) return NULL;
    entry_t *e = entry_at(self, fd, 0);
    if (e != NULL && e->proto == proto) entry_clear(e);
    Py_RETURN_NONE;
}

static PyObject *Lane_busy(Lane *self, PyObject *arg) {
    long fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred()) return NULL;
    entry_t *e = entry_at(self, fd, 0);
    return PyBool_FromLong(e != NULL && e->state == INFLIGHT);
}

/* The awaited slot goes into the connection's queue: from here on the connection's own
 * path answers in order (``drain``), and the lane's answer only fills the slot. */
static int materialize(Lane *self, entry_t *e) {
    e->state = DIRTY;
    if (e->token == NULL) return 0;
    self->queued++;
    PyObject *r = PyObject_CallMethodOneArg(e->pending, str_append, e->token);
    Py_CLEAR(e->token);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

typedef struct {
    PyObject *topic; /* bytes */
    PyObject *acks;  /* "0" | "1" | "all" */
    PyObject *keys, *values, *slots;
    PyObject *protos; /* each slot's connection (``owners``: ACLs check them), else None */
    PyObject *last_key;
} group_t;

static PyObject *Lane_take(Lane *self, PyObject *args) {
    PyObject *events, *now;
    int accept, stamp, owners = 0;
    if (!PyArg_ParseTuple(args, "O!Opp|p", &PyList_Type, &events, &now, &accept, &stamp,
                          &owners))
        return NULL;
    stamp = stamp && now != Py_None;
    PyObject *rest = PyList_New(0), *reads = PyList_New(0), *groups_out = NULL;
    group_t groups[MAX_GROUPS];
    int ngroups = 0;
    if (rest == NULL || reads == NULL) goto fail;
    Py_ssize_t n = PyList_GET_SIZE(events);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(events, i);
        long fd = -1, ev = 0;
        if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2) {
            fd = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
            ev = PyLong_AsLong(PyTuple_GET_ITEM(item, 1));
            if (PyErr_Occurred()) goto fail;
        }
        entry_t *e = entry_at(self, fd, 0);
        if (e == NULL || e->state == FREE || e->state == DIRTY) goto pass;
        if (e->state == INFLIGHT) {  /* more from a connection whose reply is awaited */
            if (materialize(self, e) < 0) goto fail;
            goto pass;
        }
        if (ev != EV_IN || !accept) goto pass;
        {
            PyObject *key = PyTuple_GET_ITEM(item, 0);
            PyObject *selectable = PyDict_GetItemWithError(self->selectables, key);
            if (selectable != e->transport) {  /* not ours any more: forget it */
                if (PyErr_Occurred()) goto fail;
                entry_clear(e);
                goto pass;
            }
        }
        {
            ssize_t got = recv((int)fd, self->buf, READ_BYTES, 0);
            if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                continue;
            if (got <= 0) {  /* EOF or an error: the reactor reads it again and tells */
                e->state = DIRTY;
                goto pass;
            }
            const unsigned char *b = self->buf;
            struct produce_line f;
            Py_ssize_t end = got < READ_BYTES
                ? match_produce_line(b, got, 0, self->max_line, self->max_value, &f) : -1;
            if (now != Py_None && PyObject_SetAttr(e->proto, str_last_active, now) < 0)
                goto fail;
            PyObject *acks = f.acks == ACKS_0 ? acks_0 : f.acks == ACKS_ALL ? acks_all : acks_1;
            group_t *g = NULL;
            if (end == got) {
                Py_ssize_t tlen = f.topic1 - f.topic0;
                for (int k = 0; k < ngroups; k++) {
                    if (groups[k].acks == acks && PyBytes_GET_SIZE(groups[k].topic) == tlen
                            && memcmp(PyBytes_AS_STRING(groups[k].topic), b + f.topic0, tlen) == 0) {
                        g = &groups[k];
                        break;
                    }
                }
                if (g == NULL && ngroups < MAX_GROUPS) {
                    g = &groups[ngroups];
                    memset(g, 0, sizeof *g);
                    g->topic = PyBytes_FromStringAndSize((const char *)b + f.topic0, tlen);
                    g->keys = PyList_New(0);
                    g->values = PyList_New(0);
                    g->slots = PyList_New(0);
                    g->protos = owners ? PyList_New(0) : (Py_INCREF(Py_None), Py_None);
                    g->acks = acks;
                    Py_INCREF(acks);
                    ngroups++;
                    if (g->topic == NULL || g->keys == NULL || g->values == NULL
                            || g->slots == NULL || g->protos == NULL)
                        goto fail;
                }
            }
            if (g == NULL) {  /* not one plain PRODUCE (or too many topics): the bytes back */
                e->state = DIRTY;
                PyObject *data = PyBytes_FromStringAndSize((const char *)b, got);
                if (data == NULL) goto fail;
                PyObject *pair = PyTuple_Pack(2, PyTuple_GET_ITEM(item, 0), data);
                Py_DECREF(data);
                if (pair == NULL) goto fail;
                int bad = PyList_Append(reads, pair);
                Py_DECREF(pair);
                if (bad < 0) goto fail;
                continue;
            }
            Py_ssize_t klen = f.key1 - f.key0;
            PyObject *k;
            if (g->last_key != NULL && PyBytes_GET_SIZE(g->last_key) == klen
                    && memcmp(PyBytes_AS_STRING(g->last_key), b + f.key0, klen) == 0) {
                k = g->last_key;  /* keys repeat: one object */
                Py_INCREF(k);
            } else {
                k = PyBytes_FromStringAndSize((const char *)b + f.key0, klen);
                if (k == NULL) goto fail;
                Py_INCREF(k);
                Py_XSETREF(g->last_key, k);
            }
            PyObject *v = PyBytes_FromStringAndSize((const char *)b + f.value0, f.value1 - f.value0);
            PyObject *cid = PyBytes_FromStringAndSize((const char *)b + f.cid0, f.cid1 - f.cid0);
            PyObject *tag = PyLong_FromUnsignedLongLong((e->gen << 32) | (unsigned long long)fd);
            PyObject *slot = PyList_New(stamp ? 4 : 3);
            if (v == NULL || cid == NULL || tag == NULL || slot == NULL) {
                Py_DECREF(k); Py_XDECREF(v); Py_XDECREF(cid); Py_XDECREF(tag); Py_XDECREF(slot);
                goto fail;
            }
            Py_INCREF(Py_None);
            PyList_SET_ITEM(slot, 0, Py_None);
            PyList_SET_ITEM(slot, 1, cid);
            PyList_SET_ITEM(slot, 2, tag);
            if (stamp) {  /* the read's time, for the request latency (metrics on) */
                Py_INCREF(now);
                PyList_SET_ITEM(slot, 3, now);
            }
            int bad = PyList_Append(g->keys, k) < 0 || PyList_Append(g->values, v) < 0
                      || PyList_Append(g->slots, slot) < 0
                      || (owners && PyList_Append(g->protos, e->proto) < 0);
            Py_DECREF(k);
            Py_DECREF(v);
            if (bad) { Py_DECREF(slot); goto fail; }
            e->token = slot;  /* the reference */
            e->state = INFLIGHT;
            self->taken++;
            continue;
        }
    pass:
        if (PyList_Append(rest, item) < 0) goto fail;
    }
    groups_out = PyList_New(ngroups);
    if (groups_out == NULL) goto fail;
    for (int k = 0; k < ngroups; k++) {
        group_t *g = &groups[k];
        PyObject *t = PyTuple_Pack(6, g->topic, g->acks, g->keys, g->values, g->slots,
                                   g->protos);
        if (t == NULL) goto fail;
        PyList_SET_ITEM(groups_out, k, t);
    }
    for (int k = 0; k < ngroups; k++) {
        group_t *g = &groups[k];
        Py_XDECREF(g->topic); Py_XDECREF(g->acks); Py_XDECREF(g->keys);
        Py_XDECREF(g->values); Py_XDECREF(g->slots); Py_XDECREF(g->protos);
        Py_XDECREF(g->last_key);
    }
    return Py_BuildValue("(NNN)", rest, reads, groups_out);
fail:
    /* Only allocation failures get here; slots already taken stay INFLIGHT with no
     * answer coming, so their connections are put back on their own path first. */
    for (int k = 0; k < ngroups; k++) {
        group_t *g = &groups[k];
        if (g->slots != NULL) {
            for (Py_ssize_t s = 0; s < PyList_GET_SIZE(g->slots); s++) {
                PyObject *tag = PyList_GET_ITEM(PyList_GET_ITEM(g->slots, s), 2);
                unsigned long long t = PyLong_AsUnsignedLongLong(tag);
                entry_t *e = entry_at(self, (long)(t & 0xffffffffULL), 0);
                if (e != NULL && e->state == INFLIGHT) { Py_CLEAR(e->token); e->state = DIRTY; }
            }
        }
        Py_XDECREF(g->topic); Py_XDECREF(g->acks); Py_XDECREF(g->keys);
        Py_XDECREF(g->values); Py_XDECREF(g->slots); Py_XDECREF(g->protos);
        Py_XDECREF(g->last_key);
    }
    Py_XDECREF(rest);
    Py_XDECREF(reads);
    Py_XDECREF(groups_out);
    return NULL;
}

/* One slot whose reply is in item 0: sent at once when its connection waits for just this
 * reply on the lane, else handed to the connection's path (out). */
static int deliver_one(Lane *self, PyObject *token, PyObject *out) {
    if (!PyList_Check(token) || PyList_GET_SIZE(token) < 3 || PyList_GET_SIZE(token) > 4
            || !PyBytes_Check(PyList_GET_ITEM(token, 0))) {
        PyErr_SetString(PyExc_TypeError, "a lane slot is [reply bytes, cid, tag(, time)]");
        return -1;
    }
    unsigned long long tag = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(token, 2));
    if (tag == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    if (PyList_SetSlice(token, 2, PyList_GET_SIZE(token), NULL) < 0)
        return -1;  /* a plain [reply, cid] again */
    entry_t *e = entry_at(self, (long)(tag & 0xffffffffULL), 0);
    if (e == NULL || e->state == FREE || e->gen != tag >> 32) return 0;  /* gone */
    PyObject *reply = PyList_GET_ITEM(token, 0);
    PyObject *rest = Py_None;
    PyObject *owned = NULL;
    if (e->state == INFLIGHT && e->token == token) {
        Py_ssize_t size = PyBytes_GET_SIZE(reply);
        ssize_t sent = send((int)(tag & 0xffffffffULL), PyBytes_AS_STRING(reply), size,
                            MSG_DONTWAIT | MSG_NOSIGNAL);
        Py_CLEAR(e->token);
        if (sent == size) {
            e->state = CLEAN;
            return 0;
        }
        e->state = DIRTY;
        owned = sent > 0 ? PyBytes_FromStringAndSize(PyBytes_AS_STRING(reply) + sent, size - sent)
                         : (Py_INCREF(reply), reply);
        if (owned == NULL) return -1;
        rest = owned;
    }
    PyObject *pair = PyTuple_Pack(2, e->proto, rest);
    Py_XDECREF(owned);
    if (pair == NULL) return -1;
    int bad = PyList_Append(out, pair);
    Py_DECREF(pair);
    return bad;
}

static PyObject *Lane_deliver(Lane *self, PyObject *arg) {
    PyObject *tokens = PySequence_Fast(arg, "tokens must be a sequence");
    if (tokens == NULL) return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) { Py_DECREF(tokens); return NULL; }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(tokens);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (deliver_one(self, PySequence_Fast_GET_ITEM(tokens, i), out) < 0) {
            Py_DECREF(tokens);
            Py_DECREF(out);
            return NULL;
        }
    }
    Py_DECREF(tokens);
    return out;
}

/* answer(tokens, partition, first, hw): token i gets
 * b"V1|<cid>|OK|partition=<p> offset=<first + i> hw=<hw>\n" (as _cscan.fill_produce_ok and
 * broker.v1.codec.replies.PRODUCE_OK), then each is delivered. */
static PyObject *Lane_answer(Lane *self, PyObject *args) {
    PyObject *tokens_in;
    long long partition, first, hw;
    if (!PyArg_ParseTuple(args, "OLLL", &tokens_in, &partition, &first, &hw)) return NULL;
    PyObject *tokens = PySequence_Fast(tokens_in, "tokens must be a sequence");
    if (tokens == NULL) return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) { Py_DECREF(tokens); return NULL; }
    struct produce_ok_parts parts;
    produce_ok_parts(&parts, partition, hw);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(tokens);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *token = PySequence_Fast_GET_ITEM(tokens, i);
        if (!PyList_Check(token) || PyList_GET_SIZE(token) < 3 || PyList_GET_SIZE(token) > 4
                || !PyBytes_Check(PyList_GET_ITEM(token, 1))) {
            PyErr_Format(PyExc_TypeError, "token %zd is not a lane slot", i);
            goto fail;
        }
        PyObject *cid = PyList_GET_ITEM(token, 1);
        PyObject *reply = produce_ok_reply(&parts, PyBytes_AS_STRING(cid), PyBytes_GET_SIZE(cid),
                                           first + (long long)i);
        if (reply == NULL) goto fail;
        PyObject *old = PyList_GET_ITEM(token, 0);
        PyList_SET_ITEM(token, 0, reply);
        Py_XDECREF(old);
        if (deliver_one(self, token, out) < 0) goto fail;
    }
    Py_DECREF(tokens);
    return out;
fail:
    Py_DECREF(tokens);
    Py_DECREF(out);
    return NULL;
}

static PyObject *Lane_taken(Lane *self, PyObject *unused) {
    return Py_BuildValue("(KK)", self->taken, self->queued);
}

static PyMethodDef Lane_methods[] = {
    {"taken", (PyCFunction)Lane_taken, METH_NOARGS, "taken() -> (taken, queued): requests taken on the lane; of those, how many had their slot put into the connection's queue (more came before the answer)."},
    {"settle", (PyCFunction)Lane_settle, METH_VARARGS,
     "settle(fd, protocol, transport, pending): the connection is clean (on the lane)."},
    {"forget", (PyCFunction)Lane_forget, METH_VARARGS,
     "forget(fd, protocol): the connection is gone."},
    {"busy", (PyCFunction)Lane_busy, METH_O, "busy(fd): a reply is awaited on the lane."},
    {"take", (PyCFunction)Lane_take, METH_VARARGS,
     "take(events, now, accept, stamp[, owners]) -> (rest, reads, groups): this turn's reads on the lane; each group (topic, acks, keys, values, slots, connections or None)."},
    {"answer", (PyCFunction)Lane_answer, METH_VARARGS,
     "answer(tokens, partition, first_offset, hw) -> [(protocol, rest | None)]."},
    {"deliver", (PyCFunction)Lane_deliver, METH_O,
     "deliver(tokens) -> [(protocol, rest | None)]: slots whose replies are set."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "broker.v1._clane.Lane",
    .tp_basicsize = sizeof(Lane),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The V1 read lane (see the module doc).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Lane_init,
    .tp_dealloc = (destructor)Lane_dealloc,
    .tp_methods = Lane_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "broker.v1._clane",
    "The V1 read lane: request/response PRODUCE a reactor turn at a time (see broker.v1.lane).",
    -1, NULL,
};

PyMODINIT_FUNC PyInit__clane(void) {
    produce_line_tables();
    acks_0 = PyUnicode_InternFromString("0");
    acks_1 = PyUnicode_InternFromString("1");
    acks_all = PyUnicode_InternFromString("all");
    str_append = PyUnicode_InternFromString("append");
    str_last_active = PyUnicode_InternFromString("_last_active");
    if (acks_0 == NULL || acks_1 == NULL || acks_all == NULL || str_append == NULL
            || str_last_active == NULL)
        return NULL;
    if (PyType_Ready(&LaneType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&LaneType);
    if (PyModule_AddObject(m, "Lane", (PyObject *)&LaneType) < 0) {
        Py_DECREF(&LaneType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
