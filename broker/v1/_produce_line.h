/* The V1 fast path's one-line match, shared by broker/v1/_cscan.c (scan_produce, the
 * compiled twin of broker.v1.codec.scan._scan_produce_py) and broker/v1/_clane.c (the
 * read lane). One plain PRODUCE line at ``pos``:
 *
 *   V1|<cid>|PRODUCE|<topic> <key>:<value>[ acks=0|1|all][\r]\n
 *
 * with Codec.match_produce's checks (value length, no "__" topic, not "." / "..") and the
 * framer's line limit. Returns the position after the line feed and fills ``f``, or -1
 * when the bytes at ``pos`` are not that shape (the caller then takes the general path).
 * And the OK reply to it (produce_ok_reply), which both format.
 */
#ifndef SKERRY_PRODUCE_LINE_H
#define SKERRY_PRODUCE_LINE_H

#include <stdio.h>
#include <string.h>

static unsigned char cid_ok[256], name_ok[256], key_ok[256], value_ok[256];

#define MAX_NAME 249
#define MAX_KEY 255

enum { ACKS_0, ACKS_1, ACKS_ALL };

struct produce_line {
    Py_ssize_t cid0, cid1, topic0, topic1, key0, key1, value0, value1;
    int acks;
};

static Py_ssize_t match_produce_line(const unsigned char *b, Py_ssize_t size, Py_ssize_t pos,
                                     Py_ssize_t max_line, Py_ssize_t max_value,
                                     struct produce_line *f) {
    Py_ssize_t p = pos;
    if (size - p < 3 || memcmp(b + p, "V1|", 3) != 0) return -1;
    p += 3;
    f->cid0 = p;
    while (p < size && cid_ok[b[p]]) p++;
    f->cid1 = p;
    if (f->cid1 == f->cid0 || size - p < 9 || memcmp(b + p, "|PRODUCE|", 9) != 0) return -1;
    p += 9;
    f->topic0 = p;
    while (p < size && name_ok[b[p]]) p++;
    f->topic1 = p;
    if (f->topic1 == f->topic0 || f->topic1 - f->topic0 > MAX_NAME || p >= size || b[p] != ' ')
        return -1;
    p++;
    f->key0 = p;
    while (p < size && key_ok[b[p]]) p++;
    f->key1 = p;
    if (f->key1 - f->key0 > MAX_KEY || p >= size || b[p] != ':') return -1;
    p++;
    f->value0 = p;
    while (p < size && value_ok[b[p]]) p++;
    f->value1 = p;
    f->acks = ACKS_1;
    if (p < size && b[p] == ' ') {
        if (size - p < 7 || memcmp(b + p, " acks=", 6) != 0) return -1;
        p += 6;
        if (b[p] == '0') { f->acks = ACKS_0; p++; }
        else if (b[p] == '1') { f->acks = ACKS_1; p++; }
        else if (size - p >= 3 && memcmp(b + p, "all", 3) == 0) { f->acks = ACKS_ALL; p += 3; }
        else return -1;
    }
    if (p < size && b[p] == '\r') p++;
    if (p >= size || b[p] != '\n') return -1;
    Py_ssize_t end = p + 1;
    /* Codec.match_produce's checks, then the framer's line limit. */
    if (f->value1 - f->value0 > max_value) return -1;
    if (f->topic1 - f->topic0 >= 2 && b[f->topic0] == '_' && b[f->topic0 + 1] == '_') return -1;
    if (f->topic1 - f->topic0 <= 2 && b[f->topic0] == '.' && b[f->topic1 - 1] == '.') return -1;
    if (end - pos > max_line) return -1;
    return end;
}

/* The PRODUCE OK reply b"V1|<cid>|OK|partition=<p> offset=<offset> hw=<hw>\n", the parts
 * that do not change along a run formatted once by the caller (produce_ok_parts). */
struct produce_ok_parts {
    char middle[48], tail[32];
    int mlen, tlen;
};

static void produce_ok_parts(struct produce_ok_parts *parts, long long partition, long long hw) {
    parts->mlen = snprintf(parts->middle, sizeof parts->middle, "|OK|partition=%lld offset=",
                           partition);
    parts->tlen = snprintf(parts->tail, sizeof parts->tail, " hw=%lld\n", hw);
}

static PyObject *produce_ok_reply(const struct produce_ok_parts *parts, const char *cid,
                                  Py_ssize_t clen, long long offset) {
    char digits[24];
    unsigned long long v = offset < 0 ? (unsigned long long)(-offset) : (unsigned long long)offset;
    int d = 0;
    do { digits[d++] = (char)('0' + v % 10); v /= 10; } while (v);
    if (offset < 0) digits[d++] = '-';
    PyObject *reply = PyBytes_FromStringAndSize(NULL, 3 + clen + parts->mlen + d + parts->tlen);
    if (reply == NULL) return NULL;
    char *w = PyBytes_AS_STRING(reply);
    memcpy(w, "V1|", 3);
    w += 3;
    memcpy(w, cid, clen);
    w += clen;
    memcpy(w, parts->middle, parts->mlen);
    w += parts->mlen;
    while (d) *w++ = digits[--d];
    memcpy(w, parts->tail, parts->tlen);
    return reply;
}

static void range_ok(unsigned char *table, int lo, int hi) {
    for (int c = lo; c <= hi; c++) table[c] = 1;
}

static void produce_line_tables(void) {
    range_ok(cid_ok, 0x21, 0x7b); range_ok(cid_ok, 0x7d, 0x7e);
    range_ok(name_ok, 'A', 'Z'); range_ok(name_ok, 'a', 'z'); range_ok(name_ok, '0', '9');
    name_ok['.'] = name_ok['_'] = name_ok['-'] = 1;
    range_ok(key_ok, 0x21, 0x2b); range_ok(key_ok, 0x2d, 0x39); range_ok(key_ok, 0x3b, 0x7b);
    range_ok(key_ok, 0x7d, 0x7e);
    range_ok(value_ok, 0x21, 0x2b); range_ok(value_ok, 0x2d, 0x7b); range_ok(value_ok, 0x7d, 0x7e);
}

#endif
