/*
 * jsconsume: a raw-socket JetStream consumer client for bench/consumer_bench.py.
 *
 * Theory of operation: one process, one TCP connection, the NATS text
 * protocol spoken directly, so the client costs little and never limits the
 * server under test.  Two modes:
 *
 *   pull  fetch+ack: publish a pull request
 *         $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer> with reply
 *         _INBOX.jc.<k> and body {"batch":B,"expires":E}; every message
 *         arriving with a $JS.ACK reply is acknowledged by publishing "+ACK"
 *         to that reply (an explicit ack per message, as clients' fetch loops
 *         do); when the batch is complete (or a 404/408 status ends it) the
 *         next request follows.  -k K keeps K requests outstanding.  Acks and
 *         requests are written in one go after each read is parsed (what a
 *         buffering client does).
 *   push  SUB <deliver subject>, print "READY", count messages; a message
 *         with a $JS.ACK reply is acknowledged with "+ACK" when -a is given;
 *         flow-control requests ($JS.FC.* reply) are answered, heartbeats
 *         (status 100 without reply) ignored.
 *
 * Both stop after N messages and print one JSON object: messages, elapsed
 * seconds from the first request (pull) / first message (push) to the last
 * message, msgs/s, requests sent, status messages seen.
 *
 * Build: gcc -O2 -o jsconsume jsconsume.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK (1u << 20)

static char *rb;
static size_t rlen, rcap;
static char *wb;
static size_t wlen, wcap;
static int fd = -1;

static long n_msgs, n_target, n_statuses, n_requests, n_fc, outstanding;
static long batch = 100, inflight = 1;
static long long expires_ns = 5000000000LL;
static int do_ack = 1, mode_pull = 1;
static const char *stream_name, *consumer_name;
static double t_first, t_last;
static double t_request; /* when the last pull request went out */
static long n_lost;      /* pull requests given up as lost (no answer past their expiry) */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "jsconsume: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void wput(const char *p, size_t n) {
    if (wlen + n > wcap) {
        size_t cap = wcap ? wcap : 65536;
        while (cap < wlen + n) cap *= 2;
        wb = realloc(wb, cap);
        if (!wb) die("realloc");
        wcap = cap;
    }
    memcpy(wb + wlen, p, n);
    wlen += n;
}

static void wflush(void) {
    size_t off = 0;
    while (off < wlen) {
        ssize_t w = send(fd, wb + off, wlen - off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                struct pollfd p = {fd, POLLOUT, 0};
                poll(&p, 1, 1000);
                continue;
            }
            die("send");
        }
        off += (size_t)w;
    }
    wlen = 0;
}

static void request_next(void) {
    char body[128], line[512];
    int bl = snprintf(body, sizeof body, "{\"batch\":%ld,\"expires\":%lld}", batch, expires_ns);
    int ll = snprintf(line, sizeof line, "PUB $JS.API.CONSUMER.MSG.NEXT.%s.%s _INBOX.jc.%ld %d\r\n",
                      stream_name, consumer_name, n_requests, bl);
    wput(line, (size_t)ll);
    wput(body, (size_t)bl);
    wput("\r\n", 2);
    n_requests++;
    outstanding++;
    t_request = now_s();
}

static void ack(const char *reply, size_t rl, const char *body, size_t bl) {
    char head[600];
    if (rl > 500) return;
    int n = snprintf(head, sizeof head, "PUB %.*s %zu\r\n", (int)rl, reply, bl);
    wput(head, (size_t)n);
    wput(body, bl);
    wput("\r\n", 2);
}

/* one delivered message (or status) */
static long got_in_batch;
static void on_msg(const char *reply, size_t rl, const char *hdr, size_t hl, int status) {
    (void)hdr;
    (void)hl;
    if (rl > 8 && !memcmp(reply, "$JS.FC.", 7)) { /* flow control request: answer */
        n_fc++;
        ack(reply, rl, "", 0);
        return;
    }
    if (status) {
        n_statuses++;
        if (mode_pull && status != 100) { /* 404/408/409: that request is over */
            outstanding--;
            got_in_batch = 0;
        }
        return;
    }
    if (n_msgs == 0 && !mode_pull) t_first = now_s();
    n_msgs++;
    t_last = now_s();
    if (do_ack && rl > 8 && !memcmp(reply, "$JS.ACK.", 8)) ack(reply, rl, "+ACK", 4);
    if (mode_pull && ++got_in_batch >= batch) {
        got_in_batch = 0;
        outstanding--;
    }
}

static int status_of(const char *hdr, size_t hl) {
    /* "NATS/1.0 404 No Messages\r\n..." -> 404; plain "NATS/1.0\r\n" -> 0 */
    if (hl < 12 || memcmp(hdr, "NATS/1.0 ", 9)) return 0;
    return atoi(hdr + 9);
}

/* parse what is buffered; returns bytes consumed */
static size_t parse(void) {
    size_t pos = 0;
    for (;;) {
        char *start = rb + pos;
        char *eol = memmem(start, rlen - pos, "\r\n", 2);
        if (!eol) break;
        size_t ll = (size_t)(eol - start);
        if (ll >= 4 && (!memcmp(start, "MSG ", 4) || !memcmp(start, "HMSG", 4))) {
            int hmsg = start[0] == 'H';
            char *tok[6];
            size_t tl[6];
            int nt = 0;
            char *p = start, *e = eol;
            while (p < e && nt < 6) {
                while (p < e && *p == ' ') p++;
                if (p >= e) break;
                char *q = p;
                while (q < e && *q != ' ') q++;
                tok[nt] = p;
                tl[nt] = (size_t)(q - p);
                nt++;
                p = q;
            }
            size_t total = (size_t)strtoul(tok[nt - 1], NULL, 10);
            size_t hlen = hmsg ? (size_t)strtoul(tok[nt - 2], NULL, 10) : 0;
            int has_reply = hmsg ? nt == 6 : nt == 5;
            size_t need = ll + 2 + total + 2;
            if (rlen - pos < need) break;
            const char *payload = eol + 2;
            int st = hmsg ? status_of(payload, hlen) : 0;
            on_msg(has_reply ? tok[3] : "", has_reply ? tl[3] : 0, payload, hlen, st);
            pos += need;
            continue;
        }
        if (ll == 4 && !memcmp(start, "PING", 4)) wput("PONG\r\n", 6);
        if (ll >= 4 && !memcmp(start, "-ERR", 4)) {
            fprintf(stderr, "jsconsume: %.*s\n", (int)ll, start);
            exit(3);
        }
        pos += ll + 2;
    }
    return pos;
}

static void connect_to(const char *host, const char *port) {
    struct addrinfo hints = {0}, *ai;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &ai)) die("getaddrinfo");
    fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) die("connect");
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int read_some(int timeout_ms) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0) return 0;
    if (rlen + READ_CHUNK > rcap) {
        rcap = (rlen + READ_CHUNK) * 2;
        rb = realloc(rb, rcap);
        if (!rb) die("realloc");
    }
    ssize_t n = recv(fd, rb + rlen, READ_CHUNK, 0);
    if (n <= 0) {
        fprintf(stderr, "jsconsume: server closed the connection\n");
        exit(3);
    }
    rlen += (size_t)n;
    size_t used = parse();
    memmove(rb, rb + used, rlen - used);
    rlen -= used;
    return 1;
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *port = "4222", *deliver = NULL;
    int ch;
    double idle_s = 10.0;
    while ((ch = getopt(argc, argv, "H:P:s:c:n:b:k:e:d:Ai:")) != -1) {
        switch (ch) {
        case 'H': host = optarg; break;
        case 'P': port = optarg; break;
        case 's': stream_name = optarg; break;
        case 'c': consumer_name = optarg; break;
        case 'n': n_target = atol(optarg); break;
        case 'b': batch = atol(optarg); break;
        case 'k': inflight = atol(optarg); break;
        case 'e': expires_ns = atoll(optarg); break;
        case 'd': deliver = optarg; mode_pull = 0; break;
        case 'A': do_ack = 0; break;
        case 'i': idle_s = atof(optarg); break;
        default:
            fprintf(stderr, "usage: jsconsume -P port -n N (-s stream -c consumer [-b batch] [-k K] | -d deliver_subject) [-A]\n");
            return 2;
        }
    }
    if (n_target <= 0 || (mode_pull && (!stream_name || !consumer_name))) {
        fprintf(stderr, "jsconsume: need -n and -s/-c (pull) or -d (push)\n");
        return 2;
    }
    rcap = READ_CHUNK * 2;
    rb = malloc(rcap);
    connect_to(host, port);
    const char *conn = "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,"
                       "\"no_responders\":true,\"protocol\":1,\"name\":\"jsconsume\"}\r\n";
    wput(conn, strlen(conn));
    if (mode_pull) {
        wput("SUB _INBOX.jc.* 1\r\n", 19);
    } else {
        char sub[300];
        int n = snprintf(sub, sizeof sub, "SUB %s 1\r\n", deliver);
        wput(sub, (size_t)n);
    }
    wput("PING\r\n", 6);
    wflush();
    if (!mode_pull) {
        printf("READY\n");
        fflush(stdout);
    }
    double last_progress = now_s();
    long seen = 0;
    if (mode_pull) {
        t_first = now_s();
        while (outstanding < inflight) request_next();
        wflush();
    }
    while (n_msgs < n_target) {
        read_some(200);
        if (mode_pull) {
            while (outstanding < inflight && n_msgs + outstanding * batch < n_target + batch * inflight)
                request_next();
        }
        if (wlen) wflush();
        if (n_msgs != seen) {
            seen = n_msgs;
            last_progress = now_s();
        } else if (now_s() - last_progress > idle_s) {
            break;
        } else if (mode_pull && outstanding &&
                   now_s() - (t_request > last_progress ? t_request : last_progress) >
                       (double)expires_ns / 1e9 + 1.0) {
            /* neither messages nor a 408 past the expiry: the request was lost
               (a leader change drops waiting requests); ask again, as clients do */
            n_lost += outstanding;
            outstanding = 0;
        }
    }
    wput("PING\r\n", 6);
    wflush();
    double el = t_last - t_first;
    printf("{\"mode\":\"%s\",\"ok\":%s,\"msgs\":%ld,\"elapsed_s\":%.6f,\"msgs_per_s\":%.1f,"
           "\"requests\":%ld,\"statuses\":%ld,\"flow_control\":%ld,\"lost_requests\":%ld}\n",
           mode_pull ? "pull" : "push", n_msgs >= n_target ? "true" : "false", n_msgs, el,
           el > 0 ? (double)n_msgs / el : 0.0, n_requests, n_statuses, n_fc, n_lost);
    return n_msgs >= n_target ? 0 : 1;
}
