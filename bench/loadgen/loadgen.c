/*
 * loadgen: a small raw-socket NATS load generator for bench/core_bench.py.
 *
 * Theory of operation: one process, one TCP connection, the NATS text
 * protocol spoken directly (no client library), so the load side costs a few
 * percent of a core and is never what limits the server under test.
 *
 *   pub  CONNECT, then write N "PUB subj S\r\n<payload>\r\n" ops in large
 *        batches (one write of ~batch_bytes each); optionally PING every
 *        ping_every messages and keep at most max_out PINGs unanswered
 *        (pacing); finally PING and wait for its PONG, which tells us the
 *        server consumed everything we sent.
 *   sub  SUB subj, PING/PONG so the SUB is registered, print "READY", then
 *        count MSG ops until N arrived (first-to-last timing).  With -Q the
 *        SUB joins that queue group and N is only an upper bound: the member
 *        stops after the idle timeout once messages flowed (it cannot know
 *        its share); first/last times are CLOCK_MONOTONIC, comparable across
 *        processes, so the caller can take the group's span.
 *   rep  SUB subj, "READY", answer each MSG on its reply subject with the
 *        same payload; exits after N replies (or when the server closes).
 *   req  SUB _INBOX.lg<pid>.*, then send N requests with reply subject
 *        _INBOX.lg<pid>.<i>, keeping K in flight (K=1: strictly sequential);
 *        per-request round-trip latency is recorded.
 *   jspub  JetStream publish: exactly req (reply _INBOX.lg<pid>.<i>, K in flight;
 *        K=1 is one publish at a time), and every reply must be a PubAck
 *        ({"stream":...,"seq":N} without "error"); acks that are not are
 *        counted and the first one is reported.  The subject is the stream's.
 *        -I: every request is an HPUB whose header block carries a unique
 *        Nats-Msg-Id (<pid>-<i>), the JetStream dedupe path.
 *
 * The inbound parser is incremental: it keeps unconsumed bytes across reads
 * and never assumes an op (control line or payload) arrives in one read.  It
 * understands MSG, HMSG, PING, PONG, +OK, INFO and -ERR; every mode answers
 * the server's PINGs.  The result is one JSON object on stdout (after the
 * "READY" line for sub/rep); diagnostics go to stderr.
 *
 * Build: gcc -O2 -o loadgen loadgen.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF_INIT (4u << 20)
#define READ_CHUNK (1u << 20)

typedef struct conn conn_t;
typedef void (*msg_cb)(conn_t *c, const char *subj, size_t subj_len, const char *reply,
                       size_t reply_len, const char *payload, size_t size, double now);

struct conn {
    int fd;
    char *rb;
    size_t rlen, rpos, rcap;
    char *wb;
    size_t wlen, wcap;
    long pongs;      /* PONGs received (answers to our PINGs) */
    long srv_pings;  /* PINGs the server sent us (answered) */
    long msgs;       /* MSG/HMSG ops received */
    long bad_size;   /* MSGs whose size was not the expected one */
    size_t expect_size;
    uint64_t bytes_in;
    int closed;      /* server closed the connection */
    int proto_err;   /* our parser could not make sense of the stream */
    char err[256];   /* last -ERR text, JSON-safe */
    msg_cb on_msg;
};

static volatile sig_atomic_t g_stop = 0;
static const char *g_user = NULL; /* -u: CONNECT as this user (password the same) */
static int g_msgid = 0; /* -I: req/jspub send HPUB with a unique Nats-Msg-Id header */
static void on_term(int sig) { (void)sig; g_stop = 1; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void wb_append(conn_t *c, const char *data, size_t n) {
    if (c->wlen + n > c->wcap) {
        size_t cap = c->wcap ? c->wcap : 65536;
        while (cap < c->wlen + n) cap *= 2;
        c->wb = realloc(c->wb, cap);
        if (!c->wb) die("realloc");
        c->wcap = cap;
    }
    memcpy(c->wb + c->wlen, data, n);
    c->wlen += n;
}

static void write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd pfd = {fd, POLLOUT, 0};
                poll(&pfd, 1, 1000);
                continue;
            }
            die("send");
        }
        p += w;
        n -= (size_t)w;
    }
}

static void flush_wb(conn_t *c) {
    if (c->wlen) {
        write_all(c->fd, c->wb, c->wlen);
        c->wlen = 0;
    }
}

static int tokenize(const char *p, size_t n, const char **tok, size_t *tl, int maxtok) {
    int nt = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && (p[i] == ' ' || p[i] == '\t')) i++;
        if (i >= n) break;
        if (nt == maxtok) return -1;
        size_t s = i;
        while (i < n && p[i] != ' ' && p[i] != '\t') i++;
        tok[nt] = p + s;
        tl[nt] = i - s;
        nt++;
    }
    return nt;
}

static int parse_size(const char *p, size_t n, size_t *out) {
    size_t v = 0;
    if (n == 0 || n > 12) return -1;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (size_t)(p[i] - '0');
    }
    *out = v;
    return 0;
}

static void set_err(conn_t *c, const char *p, size_t n) {
    size_t j = 0;
    for (size_t i = 0; i < n && j < sizeof(c->err) - 1; i++) {
        char ch = p[i];
        if (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) ch = '\'';
        c->err[j++] = ch;
    }
    c->err[j] = 0;
}

/* Consume every complete op in the read buffer; keep a partial one. */
static void parse(conn_t *c, double now) {
    for (;;) {
        char *p = c->rb + c->rpos;
        size_t avail = c->rlen - c->rpos;
        if (!avail) break;
        char *nl = memchr(p, '\n', avail);
        if (!nl) break;
        size_t linelen = (size_t)(nl - p);
        size_t l = linelen;
        if (l && p[l - 1] == '\r') l--;
        int hmsg = l >= 5 && memcmp(p, "HMSG ", 5) == 0;
        if ((l >= 4 && memcmp(p, "MSG ", 4) == 0) || hmsg) {
            const char *tok[6];
            size_t tl[6];
            size_t skip = hmsg ? 5 : 4;
            int nt = tokenize(p + skip, l - skip, tok, tl, 6);
            int lo = hmsg ? 4 : 3;
            size_t size = 0;
            if (nt < lo || nt > lo + 1 || parse_size(tok[nt - 1], tl[nt - 1], &size) < 0) {
                c->proto_err = 1;
                set_err(c, p, l);
                return;
            }
            size_t need = linelen + 1 + size + 2;
            if (avail < need) {
                if (c->rpos + need > c->rcap) {
                    /* make room for a payload bigger than the buffer */
                    memmove(c->rb, p, avail);
                    c->rlen = avail;
                    c->rpos = 0;
                    if (need > c->rcap) {
                        c->rb = realloc(c->rb, need + READ_CHUNK);
                        if (!c->rb) die("realloc");
                        c->rcap = need + READ_CHUNK;
                    }
                }
                break;
            }
            const char *payload = nl + 1;
            int has_reply = nt == lo + 1;
            c->msgs++;
            if (c->expect_size && size != c->expect_size) c->bad_size++;
            if (c->on_msg)
                c->on_msg(c, tok[0], tl[0], has_reply ? tok[2] : NULL, has_reply ? tl[2] : 0,
                          payload, size, now);
            c->rpos += need;
            continue;
        }
        if (l >= 4 && strncasecmp(p, "PING", 4) == 0) {
            c->srv_pings++;
            wb_append(c, "PONG\r\n", 6);
        } else if (l >= 4 && strncasecmp(p, "PONG", 4) == 0) {
            c->pongs++;
        } else if (l >= 4 && memcmp(p, "-ERR", 4) == 0) {
            set_err(c, p, l);
            fprintf(stderr, "loadgen: server said: %.*s\n", (int)l, p);
        }
        /* INFO, +OK: nothing to do */
        c->rpos += linelen + 1;
    }
    if (c->rpos == c->rlen) c->rpos = c->rlen = 0;
}

/* Wait up to timeout_ms for input, read what is there, parse it, flush any
 * answers.  Returns bytes read (0 on timeout), -1 when the server closed. */
static long pump(conn_t *c, int timeout_ms) {
    struct pollfd pfd = {c->fd, POLLIN, 0};
    int r = poll(&pfd, 1, timeout_ms);
    if (r < 0) {
        if (errno == EINTR) return 0;
        die("poll");
    }
    if (r == 0) return 0;
    if (c->rcap - c->rlen < READ_CHUNK) {
        if (c->rpos) {
            memmove(c->rb, c->rb + c->rpos, c->rlen - c->rpos);
            c->rlen -= c->rpos;
            c->rpos = 0;
        }
        if (c->rcap - c->rlen < READ_CHUNK) {
            c->rcap = c->rlen + READ_CHUNK * 2;
            c->rb = realloc(c->rb, c->rcap);
            if (!c->rb) die("realloc");
        }
    }
    ssize_t n = recv(c->fd, c->rb + c->rlen, c->rcap - c->rlen, 0);
    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) return 0;
        if (errno == ECONNRESET) {
            c->closed = 1;
            return -1;
        }
        die("recv");
    }
    if (n == 0) {
        c->closed = 1;
        return -1;
    }
    c->rlen += (size_t)n;
    c->bytes_in += (uint64_t)n;
    parse(c, now_s());
    flush_wb(c);
    return n;
}

static void conn_open(conn_t *c, const char *host, const char *port) {
    memset(c, 0, sizeof(*c));
    struct addrinfo hints = {0}, *res;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc) {
        fprintf(stderr, "loadgen: getaddrinfo: %s\n", gai_strerror(rc));
        exit(2);
    }
    c->fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
    if (c->fd < 0) die("socket");
    if (connect(c->fd, res->ai_addr, res->ai_addrlen) < 0) die("connect");
    freeaddrinfo(res);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->rcap = RBUF_INIT;
    c->rb = malloc(c->rcap);
    if (!c->rb) die("malloc");
    char cn[600];
    if (g_user != NULL && strlen(g_user) < 200) {
        snprintf(cn, sizeof(cn),
                 "CONNECT {\"verbose\":false,\"pedantic\":false,\"lang\":\"c\","
                 "\"name\":\"loadgen\",\"protocol\":1,\"user\":\"%s\",\"pass\":\"%s\"}\r\n",
                 g_user, g_user);
    } else {
        snprintf(cn, sizeof(cn),
                 "CONNECT {\"verbose\":false,\"pedantic\":false,\"lang\":\"c\","
                 "\"name\":\"loadgen\",\"protocol\":1%s}\r\n",
                 g_msgid ? ",\"headers\":true" : "");
    }
    write_all(c->fd, cn, strlen(cn));
}

/* PING and wait for every PONG we are owed. Returns 0, or -1 on close/timeout. */
static int ping_sync(conn_t *c, long *pings_sent, double timeout_s) {
    write_all(c->fd, "PING\r\n", 6);
    (*pings_sent)++;
    double deadline = now_s() + timeout_s;
    while (c->pongs < *pings_sent) {
        if (pump(c, 100) < 0) return -1;
        if (now_s() > deadline || g_stop) return -1;
    }
    return 0;
}

typedef struct {
    const char *host, *port, *subject;
    long count;
    size_t size;
    size_t batch_bytes;
    long ping_every;
    long max_out;
    long inflight;
    double timeout_s;
    long nsubjects;  /* pub: > 0 rotates over <subject>.<i mod n>, fixed width */
    long keys; /* req/jspub: > 0 appends ".<key>" to the subject, key spread over 0..keys-1 */
    const char *queue; /* sub: -Q queue group (NULL: plain subscription) */
} opts_t;

static void usage(void) {
    fprintf(stderr,
            "usage: loadgen pub|sub|req|rep|jspub [-H host] [-P port] [-s subject] [-n count]\n"
            "               [-z size] [-b batch_bytes] [-i ping_every] [-w max_pings_out]\n"
            "               [-k inflight] [-t idle_timeout_s] [-S nsubjects] [-K keys]\n"
            "               [-u user (password the same)] [-Q queue_group]\n"
            "               [-I (req/jspub: HPUB with a unique Nats-Msg-Id)]\n");
    exit(2);
}

static void fill_payload(char *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (char)('a' + i % 26);
}

/* ---------------------------------------------------------------- pub --- */

static int mode_pub(const opts_t *o) {
    conn_t c;
    conn_open(&c, o->host, o->port);
    long pings = 0;
    if (ping_sync(&c, &pings, o->timeout_s) < 0) {
        fprintf(stderr, "loadgen pub: no PONG after CONNECT\n");
        return 1;
    }
    char hdr[512];
    int width = 0; /* digits of the rotating subject's last token */
    for (long v = o->nsubjects > 1 ? o->nsubjects - 1 : 0; o->nsubjects > 0; v /= 10) {
        width++;
        if (v < 10) break;
    }
    int hl;
    if (o->nsubjects > 0)
        hl = snprintf(hdr, sizeof(hdr), "PUB %s.%0*d %zu\r\n", o->subject, width, 0, o->size);
    else
        hl = snprintf(hdr, sizeof(hdr), "PUB %s %zu\r\n", o->subject, o->size);
    size_t digits_at = 4 + strlen(o->subject) + 1; /* "PUB " subject "." */
    long rot = 0;
    size_t rec = (size_t)hl + o->size + 2;
    size_t per_batch = o->batch_bytes / rec;
    if (per_batch < 1) per_batch = 1;
    char *block = malloc(per_batch * rec);
    if (!block) die("malloc");
    for (size_t i = 0; i < per_batch; i++) {
        char *r = block + i * rec;
        memcpy(r, hdr, (size_t)hl);
        fill_payload(r + hl, o->size);
        r[hl + o->size] = '\r';
        r[hl + o->size + 1] = '\n';
    }
    long sent = 0, next_ping = o->ping_every > 0 ? o->ping_every : -1;
    long waits = 0;
    double t0 = now_s();
    while (sent < o->count && !c.closed && !g_stop) {
        long n = (long)per_batch;
        if (n > o->count - sent) n = o->count - sent;
        if (next_ping > 0 && sent + n > next_ping) n = next_ping - sent;
        if (o->nsubjects > 0) { /* the next n subjects of the rotation, in place */
            for (long i = 0; i < n; i++) {
                char *d = block + (size_t)i * rec + digits_at;
                long v = rot;
                for (int k = width - 1; k >= 0; k--) { d[k] = (char)('0' + v % 10); v /= 10; }
                if (++rot == o->nsubjects) rot = 0;
            }
        }
        write_all(c.fd, block, (size_t)n * rec);
        sent += n;
        if (sent == next_ping) {
            write_all(c.fd, "PING\r\n", 6);
            pings++;
            next_ping += o->ping_every;
            while (pings - c.pongs > o->max_out && !c.closed && !g_stop) {
                waits++;
                if (pump(&c, 100) < 0) break;
            }
        } else {
            /* answer server PINGs / notice -ERR without blocking */
            pump(&c, 0);
        }
    }
    double t_written = now_s();
    int ok = !c.closed && ping_sync(&c, &pings, o->timeout_s) == 0;
    double t_done = now_s();
    double el = t_done - t0;
    printf("{\"mode\":\"pub\",\"ok\":%s,\"msgs\":%ld,\"size\":%zu,\"elapsed_s\":%.6f,"
           "\"write_s\":%.6f,\"msgs_per_s\":%.1f,\"ping_every\":%ld,\"max_pings_out\":%ld,"
           "\"pace_waits\":%ld,\"closed\":%s,\"err\":\"%s\"}\n",
           ok ? "true" : "false", sent, o->size, el, t_written - t0, el > 0 ? sent / el : 0.0,
           o->ping_every, o->max_out, waits, c.closed ? "true" : "false", c.err);
    return ok ? 0 : 1;
}

/* ---------------------------------------------------------------- sub --- */

static double g_first, g_last;

static void sub_on_msg(conn_t *c, const char *s, size_t sl, const char *r, size_t rl,
                       const char *p, size_t n, double now) {
    (void)s; (void)sl; (void)r; (void)rl; (void)p; (void)n;
    if (c->msgs == 1) g_first = now;
    g_last = now;
}

static int subscribe_ready(conn_t *c, const char *subject, const opts_t *o) {
    char line[600];
    int n = o->queue ? snprintf(line, sizeof(line), "SUB %s %s 1\r\n", subject, o->queue)
                     : snprintf(line, sizeof(line), "SUB %s 1\r\n", subject);
    write_all(c->fd, line, (size_t)n);
    long pings = 0;
    if (ping_sync(c, &pings, o->timeout_s) < 0) {
        fprintf(stderr, "loadgen: no PONG after SUB\n");
        return -1;
    }
    return 0;
}

static int mode_sub(const opts_t *o) {
    conn_t c;
    conn_open(&c, o->host, o->port);
    c.on_msg = sub_on_msg;
    c.expect_size = o->size;
    if (subscribe_ready(&c, o->subject, o) < 0) return 1;
    printf("READY\n");
    fflush(stdout);
    double t_ready = now_s();
    double last_data = t_ready;
    int timed_out = 0;
    /* wait for the first message up to 10x the idle timeout (publisher start) */
    while (c.msgs < o->count && !g_stop) {
        long r = pump(&c, 200);
        if (r < 0 || c.proto_err) break;
        double t = now_s();
        if (r > 0) {
            last_data = t;
        } else if (t - last_data > (c.msgs ? o->timeout_s : o->timeout_s * 10)) {
            timed_out = !(o->queue && c.msgs);  /* a queue member's normal end */
            break;
        }
    }
    double span = c.msgs > 1 ? g_last - g_first : 0.0;
    int ok = (o->queue ? c.msgs > 0 && !timed_out : c.msgs >= o->count) && !c.bad_size;
    printf("{\"mode\":\"sub\",\"ok\":%s,\"msgs\":%ld,\"expected\":%ld,\"bad_size\":%ld,"
           "\"first_to_last_s\":%.6f,\"msgs_per_s\":%.1f,\"ready_to_last_s\":%.6f,"
           "\"bytes_in\":%llu,\"closed\":%s,\"timeout\":%s,\"proto_err\":%s,"
           "\"server_pings\":%ld,\"first_t\":%.6f,\"last_t\":%.6f,\"err\":\"%s\"}\n",
           ok ? "true" : "false", c.msgs, o->count, c.bad_size, span,
           span > 0 ? (c.msgs - 1) / span : 0.0, c.msgs ? g_last - t_ready : 0.0,
           (unsigned long long)c.bytes_in, c.closed ? "true" : "false",
           timed_out ? "true" : "false", c.proto_err ? "true" : "false", c.srv_pings,
           c.msgs ? g_first : 0.0, c.msgs ? g_last : 0.0, c.err);
    return ok ? 0 : 1;
}

/* ---------------------------------------------------------------- rep --- */

static long g_replied;

static void rep_on_msg(conn_t *c, const char *s, size_t sl, const char *r, size_t rl,
                       const char *p, size_t n, double now) {
    (void)s; (void)sl; (void)now;
    if (!r) return;
    char hdr[600];
    int hl = snprintf(hdr, sizeof(hdr), "PUB %.*s %zu\r\n", (int)rl, r, n);
    wb_append(c, hdr, (size_t)hl);
    wb_append(c, p, n);
    wb_append(c, "\r\n", 2);
    g_replied++;
}

static int mode_rep(const opts_t *o) {
    conn_t c;
    conn_open(&c, o->host, o->port);
    c.on_msg = rep_on_msg;
    if (subscribe_ready(&c, o->subject, o) < 0) return 1;
    printf("READY\n");
    fflush(stdout);
    double last_data = now_s();
    while ((o->count <= 0 || g_replied < o->count) && !g_stop) {
        long r = pump(&c, 200);
        if (r < 0 || c.proto_err) break;
        if (r > 0) last_data = now_s();
        else if (now_s() - last_data > o->timeout_s * 10) break;
    }
    printf("{\"mode\":\"rep\",\"replied\":%ld,\"closed\":%s,\"err\":\"%s\"}\n", g_replied,
           c.closed ? "true" : "false", c.err);
    return 0;
}

/* ---------------------------------------------------------------- req --- */

static double *g_sent_at;
static double *g_lat;
static long g_done, g_issued, g_unknown;
static const opts_t *g_o;
static char *g_payload;

/* this process's reply prefix: _INBOX.lg<pid> (several requesters may share an account) */
static char g_inbox[64] = "_INBOX.lg";

static void req_issue(conn_t *c, long i) {
    char hdr[640];
    int hl;
    if (g_msgid) { /* HPUB subj reply hdr_len total_len, then the header block */
        char hb[96];
        int hbl = snprintf(hb, sizeof(hb), "NATS/1.0\r\nNats-Msg-Id: %ld-%ld\r\n\r\n",
                           (long)getpid(), i);
        hl = snprintf(hdr, sizeof(hdr), "HPUB %s %s.%ld %d %zu\r\n", g_o->subject, g_inbox, i,
                      hbl, (size_t)hbl + g_o->size);
        wb_append(c, hdr, (size_t)hl);
        wb_append(c, hb, (size_t)hbl);
    } else if (g_o->keys > 0) /* a stride coprime with most key counts: keys visited spread out */
        hl = snprintf(hdr, sizeof(hdr), "PUB %s.%ld %s.%ld %zu\r\n", g_o->subject,
                      (long)(((unsigned long)i * 7919UL) % (unsigned long)g_o->keys), g_inbox,
                      i, g_o->size);
    else
        hl = snprintf(hdr, sizeof(hdr), "PUB %s %s.%ld %zu\r\n", g_o->subject, g_inbox, i,
                      g_o->size);
    if (!g_msgid) wb_append(c, hdr, (size_t)hl);
    wb_append(c, g_payload, g_o->size);
    wb_append(c, "\r\n", 2);
    g_sent_at[i] = now_s();
}

/* jspub: what the replies said */
static int g_jsack;
static long g_acks_ok, g_acks_bad;
static size_t g_seq_max;
static char g_bad_ack[256];

static void check_ack(const char *p, size_t n) {
    static const char head[] = "{\"stream\":";
    const char *seq = memmem(p, n, "\"seq\":", 6);
    size_t v = 0, i = 0;
    if (seq) {
        const char *d = seq + 6;
        while (d + i < p + n && d[i] >= '0' && d[i] <= '9') v = v * 10 + (size_t)(d[i++] - '0');
    }
    if (n > sizeof(head) - 1 && memcmp(p, head, sizeof(head) - 1) == 0 && seq && i > 0 &&
        v > 0 && !memmem(p, n, "\"error\"", 7)) {
        g_acks_ok++;
        if (v > g_seq_max) g_seq_max = v;
        return;
    }
    if (!g_acks_bad++) {
        size_t j = 0;
        for (size_t k = 0; k < n && j < sizeof(g_bad_ack) - 1; k++) {
            char ch = p[k];
            if (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) ch = '\'';
            g_bad_ack[j++] = ch;
        }
        g_bad_ack[j] = 0;
    }
}

static void req_on_msg(conn_t *c, const char *s, size_t sl, const char *r, size_t rl,
                       const char *p, size_t n, double now) {
    (void)r; (void)rl;
    if (g_jsack) check_ack(p, n);
    const char *dot = memrchr(s, '.', sl);
    size_t id;
    if (!dot || parse_size(dot + 1, sl - (size_t)(dot + 1 - s), &id) < 0 ||
        (long)id >= g_o->count || g_sent_at[id] == 0) {
        g_unknown++;
        return;
    }
    g_lat[g_done++] = now - g_sent_at[id];
    g_sent_at[id] = 0;
    if (g_issued < g_o->count) req_issue(c, g_issued++);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int mode_req(const opts_t *o) {
    conn_t c;
    conn_open(&c, o->host, o->port);
    c.on_msg = req_on_msg;
    g_o = o;
    g_sent_at = calloc((size_t)o->count + 1, sizeof(double));
    g_lat = calloc((size_t)o->count + 1, sizeof(double));
    g_payload = malloc(o->size + 1);
    if (!g_sent_at || !g_lat || !g_payload) die("calloc");
    fill_payload(g_payload, o->size);
    snprintf(g_inbox, sizeof(g_inbox), "_INBOX.lg%ld", (long)getpid());
    char inbox_sub[80];
    snprintf(inbox_sub, sizeof(inbox_sub), "%s.*", g_inbox);
    if (subscribe_ready(&c, inbox_sub, o) < 0) return 1;
    double t0 = now_s();
    long k = o->inflight < 1 ? 1 : o->inflight;
    while (g_issued < k && g_issued < o->count) req_issue(&c, g_issued++);
    flush_wb(&c);
    double last_data = t0;
    int timed_out = 0;
    while (g_done < o->count && !g_stop) {
        long r = pump(&c, 200);
        if (r < 0 || c.proto_err) break;
        double t = now_s();
        if (r > 0) last_data = t;
        else if (t - last_data > o->timeout_s) {
            timed_out = 1;
            break;
        }
    }
    double el = now_s() - t0;
    qsort(g_lat, (size_t)g_done, sizeof(double), cmp_double);
#define PCT(q) (g_done ? g_lat[(size_t)((g_done - 1) * (q))] * 1e6 : 0.0)
    int ok = g_done == o->count && (!g_jsack || g_acks_ok == o->count);
    if (g_jsack)
        printf("{\"mode\":\"jspub\",\"acks_ok\":%ld,\"acks_bad\":%ld,\"seq_max\":%zu,"
               "\"bad_ack\":\"%s\",\"ok\":%s,",
               g_acks_ok, g_acks_bad, g_seq_max, g_bad_ack, ok ? "true" : "false");
    else
        printf("{\"mode\":\"req\",\"ok\":%s,", ok ? "true" : "false");
    printf("\"requests\":%ld,\"done\":%ld,\"inflight\":%ld,"
           "\"elapsed_s\":%.6f,\"rps\":%.1f,\"lat_us\":{\"p50\":%.1f,\"p90\":%.1f,"
           "\"p99\":%.1f,\"max\":%.1f},\"unknown_replies\":%ld,\"closed\":%s,\"timeout\":%s,"
           "\"err\":\"%s\"}\n",
           o->count, g_done, k, el, el > 0 ? g_done / el : 0.0, PCT(0.5),
           PCT(0.9), PCT(0.99), PCT(1.0), g_unknown, c.closed ? "true" : "false",
           timed_out ? "true" : "false", c.err);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    const char *mode = argv[1];
    opts_t o = {"127.0.0.1", "4222", "bench.core", 1000000, 128, 65536, 0, 1, 1, 10.0, 0, 0};
    int ch;
    optind = 2;
    while ((ch = getopt(argc, argv, "H:P:s:n:z:b:i:w:k:t:S:K:u:Q:I")) != -1) {
        switch (ch) {
        case 'H': o.host = optarg; break;
        case 'P': o.port = optarg; break;
        case 's': o.subject = optarg; break;
        case 'n': o.count = atol(optarg); break;
        case 'z': o.size = (size_t)atol(optarg); break;
        case 'b': o.batch_bytes = (size_t)atol(optarg); break;
        case 'i': o.ping_every = atol(optarg); break;
        case 'w': o.max_out = atol(optarg); break;
        case 'k': o.inflight = atol(optarg); break;
        case 't': o.timeout_s = atof(optarg); break;
        case 'S': o.nsubjects = atol(optarg); break;
        case 'K': o.keys = atol(optarg); break;
        case 'u': g_user = optarg; break;
        case 'Q': o.queue = optarg; break;
        case 'I': g_msgid = 1; break;
        default: usage();
        }
    }
    if (strlen(o.subject) > 400) usage();
    struct sigaction sa = {0};
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(mode, "pub")) return mode_pub(&o);
    if (!strcmp(mode, "sub")) return mode_sub(&o);
    if (!strcmp(mode, "rep")) return mode_rep(&o);
    if (!strcmp(mode, "req")) return mode_req(&o);
    if (!strcmp(mode, "jspub")) {
        g_jsack = 1;
        return mode_req(&o);
    }
    usage();
    return 2;
}
