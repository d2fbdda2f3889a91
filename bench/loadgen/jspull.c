/*
 * jspull: a filtered pull consumer as libnats users write it (bench/scale_bench.py).
 *
 * Theory of operation: the official C client (libnats, Debian's libnats-dev)
 * creates the consumer the way its users do: js_PullSubscribe(subject,
 * durable) makes a durable pull consumer with explicit acks and
 * filter_subject set to the subject, bound to the stream named by -S.  Then
 * natsSubscription_Fetch(batch) in a loop, and natsMsg_Ack on every message
 * (a publish without waiting, as nats-py's ack), until N messages came.  The
 * rate is measured from the first fetch to the last message; a final flush
 * makes sure the server has every ack.  One JSON line on stdout.
 *
 * Build: gcc -O2 -o jspull jspull.c -lnats
 * Usage: jspull -P port -s subject -S stream -d durable -n count [-b batch] [-t timeout_s]
 */
#define _GNU_SOURCE
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, natsStatus s, jsErrCode jerr) {
    printf("{\"mode\":\"jspull\",\"ok\":false,\"err\":\"%s: %s (js err %d)\"}\n", what,
           natsStatus_GetText(s), (int)jerr);
    return 1;
}

int main(int argc, char **argv) {
    const char *port = "4222", *subject = "bench.js", *stream = NULL, *durable = "jspull";
    long count = 10000;
    int batch = 100;
    double timeout_s = 10.0;
    int ch;
    while ((ch = getopt(argc, argv, "P:s:S:d:n:b:t:")) != -1) {
        switch (ch) {
        case 'P': port = optarg; break;
        case 's': subject = optarg; break;
        case 'S': stream = optarg; break;
        case 'd': durable = optarg; break;
        case 'n': count = atol(optarg); break;
        case 'b': batch = atoi(optarg); break;
        case 't': timeout_s = atof(optarg); break;
        default:
            fprintf(stderr, "usage: jspull -P port -s subject -S stream -d durable -n count "
                            "[-b batch] [-t timeout_s]\n");
            return 2;
        }
    }
    char url[128];
    snprintf(url, sizeof(url), "nats://127.0.0.1:%s", port);
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    natsSubscription *sub = NULL;
    jsErrCode jerr = 0;
    natsStatus s = natsConnection_ConnectTo(&nc, url);
    if (s != NATS_OK) return fail("connect", s, 0);
    jsOptions jo;
    jsOptions_Init(&jo);
    s = natsConnection_JetStream(&js, nc, &jo);
    if (s != NATS_OK) return fail("jetstream", s, 0);
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = stream;
    s = js_PullSubscribe(&sub, js, subject, durable, &jo, &so, &jerr);
    if (s != NATS_OK) return fail("js_PullSubscribe", s, jerr);
    long got = 0, fetches = 0;
    double t0 = now_s(), last = t0;
    while (got < count) {
        natsMsgList list = {0};
        int want = (int)((count - got) < batch ? (count - got) : batch);
        s = natsSubscription_Fetch(&list, sub, want, (int64_t)(timeout_s * 1000), &jerr);
        if (s != NATS_OK) {
            natsMsgList_Destroy(&list);
            break;
        }
        fetches++;
        for (int i = 0; i < list.Count; i++) {
            natsStatus as = natsMsg_Ack(list.Msgs[i], &jo);
            if (as != NATS_OK) s = as;
        }
        got += list.Count;
        last = now_s();
        natsMsgList_Destroy(&list);
        if (s != NATS_OK) break;
    }
    natsStatus fs = natsConnection_FlushTimeout(nc, (int64_t)(timeout_s * 1000));
    double secs = last - t0;
    int ok = got == count && s == NATS_OK && fs == NATS_OK;
    printf("{\"mode\":\"jspull\",\"ok\":%s,\"msgs\":%ld,\"fetches\":%ld,\"secs\":%.6f,"
           "\"rate\":%.1f,\"err\":\"%s\"}\n",
           ok ? "true" : "false", got, fetches, secs, secs > 0 ? got / secs : 0.0,
           s == NATS_OK ? "" : natsStatus_GetText(s));
    natsSubscription_Destroy(sub);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    nats_Close();
    return ok ? 0 : 1;
}
