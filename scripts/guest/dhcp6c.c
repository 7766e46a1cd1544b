/* dhcp6c IFACE TRIES: a one-shot stateful DHCPv6 client for the test guest (busybox's
 * static build has no udhcpc6). Sends SOLICIT with rapid commit to ff02::1:2 once a
 * second (REQUEST after an ADVERTISE), up to TRIES times; on a REPLY holding an address
 * prints "<address> <server's address>" and exits 0, else exits 1. The caller sets the
 * address and routes through the server (the launcher's bridge). */
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

enum { SOLICIT = 1, ADVERTISE = 2, REQUEST = 3, REPLY = 7 };

static size_t opt(unsigned char *at, int code, const void *value, size_t len) {
    at[0] = code >> 8; at[1] = code & 255; at[2] = len >> 8; at[3] = len & 255;
    memcpy(at + 4, value, len);
    return 4 + len;
}

/* The option `code` in buf[0..len): its value and length, or NULL. */
static const unsigned char *find(const unsigned char *buf, size_t len, int code, size_t *out) {
    size_t at = 0;
    while (at + 4 <= len) {
        int c = buf[at] << 8 | buf[at + 1];
        size_t l = (size_t)(buf[at + 2] << 8 | buf[at + 3]);
        if (at + 4 + l > len) return NULL;
        if (c == code) { *out = l; return buf + at + 4; }
        at += 4 + l;
    }
    return NULL;
}

static size_t message(unsigned char *m, int kind, const unsigned char *duid,
                      const unsigned char *server, size_t server_len) {
    static const unsigned char ia[12] = {0, 0, 0, 1};
    unsigned char elapsed[2] = {0, 0};
    size_t n = 4;
    m[0] = kind; m[1] = 0x6b; m[2] = 0x76; m[3] = kind;
    n += opt(m + n, 1, duid, 10);
    if (server) n += opt(m + n, 2, server, server_len);
    n += opt(m + n, 3, ia, sizeof ia);
    n += opt(m + n, 8, elapsed, sizeof elapsed);
    if (kind == SOLICIT) n += opt(m + n, 14, "", 0);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int tries = atoi(argv[2]);
    int s = socket(AF_INET6, SOCK_DGRAM, 0);
    struct ifreq ifr = {0};
    strncpy(ifr.ifr_name, argv[1], IFNAMSIZ - 1);
    if (s < 0 || ioctl(s, SIOCGIFHWADDR, &ifr) < 0) return 1;
    unsigned char duid[10] = {0, 3, 0, 1};
    memcpy(duid + 4, ifr.ifr_hwaddr.sa_data, 6);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, argv[1], strlen(argv[1]));
    struct sockaddr_in6 me = {.sin6_family = AF_INET6, .sin6_port = htons(546)};
    if (bind(s, (struct sockaddr *)&me, sizeof me) < 0) return 1;
    struct sockaddr_in6 all = {.sin6_family = AF_INET6, .sin6_port = htons(547),
                               .sin6_scope_id = if_nametoindex(argv[1])};
    inet_pton(AF_INET6, "ff02::1:2", &all.sin6_addr);
    unsigned char out[256], in[1500], server[130];
    size_t server_len = 0;
    int kind = SOLICIT;
    for (int i = 0; i < tries; i++) {
        size_t n = message(out, kind, duid, kind == REQUEST ? server : NULL, server_len);
        sendto(s, out, n, 0, (struct sockaddr *)&all, sizeof all); /* fails while tentative */
        struct pollfd p = {.fd = s, .events = POLLIN};
        while (poll(&p, 1, 1000) > 0) {
            struct sockaddr_in6 from;
            socklen_t fl = sizeof from;
            ssize_t got = recvfrom(s, in, sizeof in, 0, (struct sockaddr *)&from, &fl);
            if (got < 4 || memcmp(in + 1, out + 1, 3) != 0) continue;
            size_t l, il;
            const unsigned char *ia = find(in + 4, got - 4, 3, &l), *sid, *addr;
            if (in[0] == ADVERTISE && (sid = find(in + 4, got - 4, 2, &l)) && l <= sizeof server) {
                memcpy(server, sid, l); server_len = l; kind = REQUEST;
                break;
            }
            if (in[0] != REPLY || !ia || l < 12 || !(addr = find(ia + 12, l - 12, 5, &il)) || il < 16)
                continue;
            char a[INET6_ADDRSTRLEN], f[INET6_ADDRSTRLEN];
            inet_ntop(AF_INET6, addr, a, sizeof a);
            inet_ntop(AF_INET6, &from.sin6_addr, f, sizeof f);
            printf("%s %s\n", a, f);
            return 0;
        }
    }
    return 1;
}
