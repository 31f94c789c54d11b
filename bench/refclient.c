/*
 * Reference request/response client in C: what this machine allows for the
 * "50 connections, one request in flight each" load, with no Python on the client side.
 *
 * bench/suite.py runs it next to the Python load generator (bench/loadgen.py) against the
 * canned-reply responder and against the real servers. It answers two questions the Python
 * figures alone cannot: how far the responder ceiling of this load shape is from the real
 * servers' rates even with a client that costs almost nothing (the kernel's per-request cost
 * on both sides bounds it), and how close the Python generator comes to a C client against
 * the same server.
 *
 * Usage: refclient <port> <connections> <warmup s> <duration s> <request file> <protocol>
 *   protocol "v1":   every reply is one line; a line holding "|ERR|" is an error.
 *   protocol "resp": every reply is a bulk string (two CRLF lines: "$<n>" and the payload),
 *                    as XADD answers; a reply starting with '-' is an error.
 * Each connection sends the request, waits for its whole reply, sends the next. The run
 * ends by itself after warmup + duration seconds (every read waits at most 1 s). Prints
 * one JSON object: {"requests": n, "window_s": s, "messages_per_s": r}. Exit 1 on an error
 * reply or a lost connection.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_SIZE 65536

struct conn {
    int fd;
    int lines; /* reply lines seen for the request in flight */
    char last; /* last byte of the previous read (a reply may split anywhere) */
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s <port> <connections> <warmup s> <duration s> <request file> "
                        "v1|resp\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), nconn = atoi(argv[2]);
    double warmup = atof(argv[3]), duration = atof(argv[4]);
    int resp = strcmp(argv[6], "resp") == 0;
    int lines_per_reply = resp ? 2 : 1;
    if (nconn < 1 || duration <= 0 || warmup < 0) {
        fprintf(stderr, "connections >= 1, duration > 0, warmup >= 0\n");
        return 2;
    }
    FILE *f = fopen(argv[5], "rb");
    if (!f) die("request file");
    fseek(f, 0, SEEK_END);
    size_t req_len = (size_t)ftell(f);
    rewind(f);
    char *req = malloc(req_len ? req_len : 1);
    if (!req || fread(req, 1, req_len, f) != req_len) die("read request");
    fclose(f);

    int epfd = epoll_create1(0);
    if (epfd < 0) die("epoll_create1");
    struct conn *conns = calloc((size_t)nconn, sizeof *conns);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < nconn; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket");
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
        epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
    }
    for (int i = 0; i < nconn; i++)
        if (write(conns[i].fd, req, req_len) != (ssize_t)req_len) die("write");

    char *buf = malloc(READ_SIZE);
    struct epoll_event events[256];
    double start = now(), begin = start + warmup, end = begin + duration;
    long counted = 0;
    int measuring = warmup == 0;
    for (;;) {
        double t = now();
        if (t >= end) break;
        if (!measuring && t >= begin) measuring = 1;
        int n = epoll_wait(epfd, events, 256, 1000);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            ssize_t got = read(c->fd, buf, READ_SIZE);
            if (got <= 0) {
                fprintf(stderr, "refclient: connection lost\n");
                return 1;
            }
            for (ssize_t j = 0; j < got; j++) {
                char ch = buf[j];
                int line_start = (j == 0 ? c->last == '\n' || c->lines == 0 : buf[j - 1] == '\n');
                if (resp && line_start && ch == '-') {
                    fprintf(stderr, "refclient: error reply\n");
                    return 1;
                }
                if (!resp && ch == '|' && j + 4 < got && memcmp(buf + j, "|ERR|", 5) == 0) {
                    fprintf(stderr, "refclient: error reply\n");
                    return 1;
                }
                if (ch == '\n') c->lines++;
            }
            c->last = buf[got - 1];
            if (c->lines >= lines_per_reply) {
                if (c->lines > lines_per_reply) {
                    fprintf(stderr, "refclient: more replies than requests\n");
                    return 1;
                }
                c->lines = 0;
                c->last = 0;
                if (measuring) counted++;
                if (write(c->fd, req, req_len) != (ssize_t)req_len) die("write");
            }
        }
    }
    double window = now() - (warmup == 0 ? start : begin);
    printf("{\"requests\": %ld, \"window_s\": %.6f, \"messages_per_s\": %.1f}\n", counted,
           window, (double)counted / window);
    return 0;
}
