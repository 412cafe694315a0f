/* Two threads on one connection over libhollywood, with TLS: one thread
 * waits in receive before anything is sent, the other sends N numbered
 * messages (100..149 bytes, sub-streams 0..2) and closes its direction;
 * the far end echoes every message and closes after the last. The
 * receiver checks every echo's bytes and counts them.
 *
 *   cc -I crates/taps-c/include examples/c/duplex.c target/release/libhollywood.a \
 *      -lpthread -ldl -lm -o duplex
 *   ./duplex IP:PORT CERT.pem KEY.pem [any|quic|hollywood|kernel] [handles|porting] [N]
 *
 * CERT and KEY are the listener's (the caller pins the certificate); KEY
 * "-" gives the caller the certificate alone (hw_security_trust_file).
 * "hollywood" is TCP Hollywood on the engine of a host-mode instance
 * (`sudo hollywood host up`). "porting" uses the layer with the original
 * TCP Hollywood API's shape: hwp_socket, hwp_setopt (protocols, TLS,
 * congestion control, keep-alive, default lifetime), hwp_connect_socket,
 * hwp_send_message / hwp_recv_message, hwp_shutdown. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hollywood.h"

static int n_messages = 200;
static hw_connection *conn; /* handles */
static int sd = -1;         /* porting */

static size_t message(int i, uint8_t *buf) {
    size_t len = 100 + (size_t)(i % 50);
    buf[0] = (uint8_t)(i >> 24);
    buf[1] = (uint8_t)(i >> 16);
    buf[2] = (uint8_t)(i >> 8);
    buf[3] = (uint8_t)i;
    for (size_t k = 4; k < len; k++)
        buf[k] = (uint8_t)(k ^ (size_t)i);
    return len;
}

struct tally {
    long messages, bytes;
    int failed;
};

static void *send_all(void *arg) {
    struct tally *t = arg;
    uint8_t buf[256];
    /* By now the receiver waits in receive: sending must not wait for it
     * (with calls that take turns, this would never get through). */
    usleep(100 * 1000);
    for (int i = 0; i < n_messages; i++) {
        size_t len = message(i, buf);
        int64_t r;
        if (conn) {
            hw_msg_ctx ctx = { .lifetime_ms = -1, .substream = (uint16_t)(i % 3),
                               .depends_on = -1, .ordered = 0 };
            r = hw_send(conn, buf, len, &ctx);
        } else {
            /* lifetime 0: the descriptor's HWP_OPT_LIFETIME_MS */
            r = hwp_send_message(sd, buf, len, 0, -1, (uint16_t)(i % 3));
        }
        if (r < 0) {
            fprintf(stderr, "send %d: %s\n", i, hw_last_error());
            t->failed = 1;
            return NULL;
        }
        t->messages++;
        t->bytes += (long)len;
    }
    if ((conn ? hw_close(conn) : hwp_shutdown(sd)) != 0) {
        fprintf(stderr, "close: %s\n", hw_last_error());
        t->failed = 1;
    }
    return NULL;
}

static void *receive_all(void *arg) {
    struct tally *t = arg;
    uint8_t buf[2048], want[256];
    uint16_t sub;
    for (;;) {
        int64_t n = conn ? hw_receive(conn, buf, sizeof buf, &sub)
                         : hwp_recv_message(sd, buf, sizeof buf, &sub);
        if (n == 0)
            return NULL;
        if (n < 4) {
            fprintf(stderr, "receive: %s\n", n < 0 ? hw_last_error() : "short message");
            t->failed = 1;
            return NULL;
        }
        int i = (int)(((uint32_t)buf[0] << 24) | ((uint32_t)buf[1] << 16) |
                      ((uint32_t)buf[2] << 8) | buf[3]);
        size_t len = (i >= 0 && i < n_messages) ? message(i, want) : 0;
        if ((size_t)n != len || memcmp(buf, want, len) != 0 || sub != i % 3) {
            fprintf(stderr, "echo %d: %lld bytes on sub-stream %u, not as sent\n", i,
                    (long long)n, sub);
            t->failed = 1;
            return NULL;
        }
        t->messages++;
        t->bytes += (long)n;
    }
}

static int setopt_u32(int opt, uint32_t v) {
    if (hwp_setopt(sd, opt, &v, sizeof v) != 0) {
        fprintf(stderr, "setopt %d: %s\n", opt, hw_last_error());
        return -1;
    }
    uint32_t back = 0;
    size_t len = sizeof back;
    if (hwp_getopt(sd, opt, &back, &len) != 0 || back != v || len != sizeof back) {
        fprintf(stderr, "getopt %d: %u, not %u\n", opt, back, v);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s IP:PORT CERT KEY [any|quic|hollywood|kernel] "
                        "[handles|porting] [N]\n", argv[0]);
        return 2;
    }
    const char *proto = argc > 4 ? argv[4] : "any";
    const char *api = argc > 5 ? argv[5] : "handles";
    if (argc > 6)
        n_messages = atoi(argv[6]);
    uint32_t mask = strcmp(proto, "quic") == 0        ? HW_QUIC
                    : strcmp(proto, "hollywood") == 0 ? HW_TCP_HOLLYWOOD
                    : strcmp(proto, "kernel") == 0    ? HW_KERNEL_TCP
                                                      : 0;
    /* KEY "-": a caller with the certificate alone. */
    hw_security *sec = strcmp(argv[3], "-") == 0 ? hw_security_trust_file(argv[2], NULL)
                                                 : hw_security_from_files(argv[2], argv[3], NULL);
    if (!sec) {
        fprintf(stderr, "TLS: %s\n", hw_last_error());
        return 1;
    }
    int protocol;
    if (strcmp(api, "porting") == 0) {
        sd = hwp_socket();
        if (setopt_u32(HWP_OPT_PROTOCOLS, mask) || setopt_u32(HWP_OPT_CONGESTION, HWP_CC_CUBIC) ||
            setopt_u32(HWP_OPT_KEEPALIVE_MS, 5000) || setopt_u32(HWP_OPT_LIFETIME_MS, 10000))
            return 1;
        if (hwp_setopt(sd, HWP_OPT_SECURITY, &sec, sizeof sec) != 0) {
            fprintf(stderr, "setopt TLS: %s\n", hw_last_error());
            return 1;
        }
        hw_security_free(sec);
        if (hwp_connect_socket(sd, argv[1]) != 0) {
            fprintf(stderr, "connect: %s\n", hw_last_error());
            return 1;
        }
        /* Options that shape the connection are taken before connect only. */
        uint32_t late = HW_QUIC;
        if (hwp_setopt(sd, HWP_OPT_PROTOCOLS, &late, sizeof late) == 0) {
            fprintf(stderr, "HWP_OPT_PROTOCOLS was taken after connect\n");
            return 1;
        }
        size_t len = sizeof protocol;
        if (hwp_getopt(sd, HWP_OPT_PROTOCOL, &protocol, &len) != 0) {
            fprintf(stderr, "getopt protocol: %s\n", hw_last_error());
            return 1;
        }
    } else {
        conn = hw_initiate_secure(argv[1], mask, sec);
        hw_security_free(sec);
        if (!conn) {
            fprintf(stderr, "connect: %s\n", hw_last_error());
            return 1;
        }
        protocol = hw_protocol(conn);
    }
    struct tally sent = {0}, echoed = {0};
    pthread_t rx, tx;
    /* The receiver first: it waits before anything is sent, and the
     * sender must not wait for it. */
    if (pthread_create(&rx, NULL, receive_all, &echoed) != 0 ||
        pthread_create(&tx, NULL, send_all, &sent) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        return 1;
    }
    pthread_join(tx, NULL);
    pthread_join(rx, NULL);
    printf("protocol %d: %ld sent (%ld bytes), %ld echoed (%ld bytes)\n", protocol,
           sent.messages, sent.bytes, echoed.messages, echoed.bytes);
    if (conn)
        hw_free(conn);
    else if (hwp_close(sd) != 0) {
        fprintf(stderr, "hwp_close: %s\n", hw_last_error());
        return 1;
    }
    return sent.failed || echoed.failed || echoed.messages != n_messages ? 1 : 0;
}
