/*
 * Canned-reply responder in C: the server that measures the load generator's ceiling.
 *
 * Same contract as bench/echo.py, without Python in the server's path: listen on
 * 127.0.0.1:<port> (0 = a free port, printed to stderr as "responder listening on
 * 127.0.0.1:<port>"), and for every occurrence of <marker> in the bytes a connection
 * sends, write <reply> once. Markers split across reads are found (the last
 * len(marker) - 1 bytes are kept). Replies that do not fit the socket buffer wait for
 * EPOLLOUT. Runs until killed (SIGTERM).
 *
 * Usage: responder <port> <marker as hex> <file holding the reply bytes>
 * Built by bench/servers.py with `cc -O2`; bench/servers.py falls back to bench/echo.py
 * when no C compiler is present.
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
#include <unistd.h>

#define READ_SIZE (256 * 1024)
#define MAX_MARKER 64

struct conn {
    int fd;
    size_t tail_len;
    char tail[MAX_MARKER];
    char *out;
    size_t out_len, out_off, out_cap;
    int want_out;
};

static char *reply;
static size_t reply_len;
static char marker[MAX_MARKER];
static size_t marker_len;
static int epfd;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void drop(struct conn *c) {
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->out);
    free(c);
}

/* Write what is pending; 0 when all is out or it must wait, -1 when the peer is gone. */
static int flush_out(struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            return -1;
        }
        c->out_off += (size_t)n;
    }
    int want = c->out_off < c->out_len;
    if (!want) c->out_off = c->out_len = 0;
    if (want != c->want_out) {
        struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c};
        epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = want;
    }
    return 0;
}

static void queue_replies(struct conn *c, size_t count) {
    size_t need = c->out_len + count * reply_len;
    if (need > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 65536;
        while (cap < need) cap *= 2;
        c->out = realloc(c->out, cap);
        if (!c->out) die("realloc");
        c->out_cap = cap;
    }
    for (size_t i = 0; i < count; i++) {
        memcpy(c->out + c->out_len, reply, reply_len);
        c->out_len += reply_len;
    }
}

static int on_readable(struct conn *c, char *buf) {
    /* buf holds the kept tail, then the new bytes */
    memcpy(buf, c->tail, c->tail_len);
    ssize_t n = read(c->fd, buf + c->tail_len, READ_SIZE);
    if (n == 0) return -1;
    if (n < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    size_t len = c->tail_len + (size_t)n, pos = 0, count = 0, after_last = 0;
    for (;;) {
        char *hit = memmem(buf + pos, len - pos, marker, marker_len);
        if (!hit) break;
        count++;
        pos = (size_t)(hit - buf) + marker_len;
        after_last = pos;
    }
    size_t keep_from = len >= marker_len - 1 ? len - (marker_len - 1) : 0;
    if (keep_from < after_last) keep_from = after_last;
    c->tail_len = len - keep_from;
    memcpy(c->tail, buf + keep_from, c->tail_len);
    if (count) {
        queue_replies(c, count);
        return flush_out(c);
    }
    return 0;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s <port> <marker hex> <reply file>\n", argv[0]);
        return 2;
    }
    size_t hex_len = strlen(argv[2]);
    if (hex_len == 0 || hex_len % 2 || hex_len / 2 >= MAX_MARKER) {
        fprintf(stderr, "marker must be 1-%d bytes of hex\n", MAX_MARKER - 1);
        return 2;
    }
    for (size_t i = 0; i < hex_len; i += 2) {
        int hi = hexval(argv[2][i]), lo = hexval(argv[2][i + 1]);
        if (hi < 0 || lo < 0) {
            fprintf(stderr, "bad hex in marker\n");
            return 2;
        }
        marker[marker_len++] = (char)(hi * 16 + lo);
    }
    FILE *f = fopen(argv[3], "rb");
    if (!f) die("reply file");
    fseek(f, 0, SEEK_END);
    reply_len = (size_t)ftell(f);
    rewind(f);
    reply = malloc(reply_len ? reply_len : 1);
    if (!reply || fread(reply, 1, reply_len, f) != reply_len) die("read reply");
    fclose(f);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (lfd < 0) die("socket");
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
    if (listen(lfd, 1024) < 0) die("listen");
    socklen_t alen = sizeof addr;
    getsockname(lfd, (struct sockaddr *)&addr, &alen);
    fprintf(stderr, "responder listening on 127.0.0.1:%d\n", ntohs(addr.sin_port));
    fflush(stderr);

    epfd = epoll_create1(0);
    if (epfd < 0) die("epoll_create1");
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &lev);
    char *buf = malloc(READ_SIZE + MAX_MARKER);
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(epfd, events, 256, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (c == NULL) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *nc = calloc(1, sizeof *nc);
                    if (!nc) die("calloc");
                    nc->fd = fd;
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = nc};
                    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
                }
                continue;
            }
            int rc = 0;
            if (events[i].events & (EPOLLERR | EPOLLHUP)) rc = -1;
            if (rc == 0 && (events[i].events & EPOLLOUT)) rc = flush_out(c);
            if (rc == 0 && (events[i].events & EPOLLIN)) rc = on_readable(c, buf);
            if (rc < 0) drop(c);
        }
    }
}
