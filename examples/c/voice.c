/* A voice sender in C over libhollywood: 50 frames of 160 bytes, each
 * useful for 150 ms, on sub-streams 0 and 1; every P-frame-like odd
 * frame depends on the frame before it. The far end echoes them; this
 * program counts the echoes.
 *
 *   cc -I crates/taps-c/include examples/c/voice.c target/release/libhollywood.a \
 *      -lpthread -ldl -lm -o voice
 *   ./voice 127.0.0.1:9000 [quic|kernel|porting]
 *
 * "porting" uses the layer with the original TCP Hollywood API's shape
 * (hwp_send_message / hwp_recv_message, thesis Table 7.2). */
#include <stdio.h>
#include <string.h>
#include "hollywood.h"

#define FRAMES 50

static int with_handles(const char *server, uint32_t mask) {
    hw_connection *c = hw_initiate(server, mask);
    if (!c) {
        fprintf(stderr, "connect: %s\n", hw_last_error());
        return 1;
    }
    int64_t prev = -1;
    for (int i = 0; i < FRAMES; i++) {
        uint8_t frame[160];
        memset(frame, i, sizeof frame);
        hw_msg_ctx ctx = { .lifetime_ms = 150, .substream = (uint16_t)(i % 2),
                           .depends_on = (i % 2) ? prev : -1, .ordered = 0 };
        int64_t ref = hw_send(c, frame, sizeof frame, &ctx);
        if (ref < 0) {
            fprintf(stderr, "send: %s\n", hw_last_error());
            return 1;
        }
        prev = ref;
    }
    if (hw_close(c) != 0) {
        fprintf(stderr, "close: %s\n", hw_last_error());
        return 1;
    }
    int echoed = 0;
    uint8_t buf[2048];
    uint16_t sub;
    int64_t n;
    while ((n = hw_receive(c, buf, sizeof buf, &sub)) > 0) {
        if (n != 160 || sub != buf[0] % 2) {
            fprintf(stderr, "bad echo: %lld bytes on sub-stream %u\n", (long long)n, sub);
            return 1;
        }
        echoed++;
    }
    if (n < 0) {
        fprintf(stderr, "receive: %s\n", hw_last_error());
        return 1;
    }
    printf("protocol %d: %d sent, %d echoed\n", hw_protocol(c), FRAMES, echoed);
    hw_free(c);
    return echoed == FRAMES ? 0 : 1;
}

static int with_descriptors(const char *server) {
    int sd = hwp_connect(server);
    if (sd < 0) {
        fprintf(stderr, "connect: %s\n", hw_last_error());
        return 1;
    }
    int64_t prev = -1;
    for (int i = 0; i < FRAMES; i++) {
        uint8_t frame[160];
        memset(frame, i, sizeof frame);
        int64_t seq = hwp_send_message(sd, frame, sizeof frame, 150, (i % 2) ? prev : -1,
                                       (uint16_t)(i % 2));
        if (seq < 0) {
            fprintf(stderr, "send_message: %s\n", hw_last_error());
            return 1;
        }
        prev = seq;
    }
    int echoed = 0;
    uint8_t buf[2048];
    uint16_t sub;
    while (echoed < FRAMES) {
        int64_t n = hwp_recv_message(sd, buf, sizeof buf, &sub);
        if (n <= 0) {
            fprintf(stderr, "recv_message: %s\n", n < 0 ? hw_last_error() : "closed");
            return 1;
        }
        echoed++;
    }
    printf("porting layer: %d sent, %d echoed\n", FRAMES, echoed);
    return hwp_close(sd) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s IP:PORT [quic|kernel|porting]\n", argv[0]);
        return 2;
    }
    const char *mode = argc > 2 ? argv[2] : "quic";
    if (strcmp(mode, "porting") == 0)
        return with_descriptors(argv[1]);
    return with_handles(argv[1], strcmp(mode, "kernel") == 0 ? HW_KERNEL_TCP : HW_QUIC);
}
