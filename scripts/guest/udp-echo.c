/* The test guest's UDP echo (busybox's nc has no UDP): every datagram to the port given
 * (default 7) goes back to its sender. Built static by scripts/build-guest. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

int main(int argc, char **argv) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons(argc > 1 ? atoi(argv[1]) : 7)};
    if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof me) != 0) return 1;
    for (;;) {
        char buf[2048];
        struct sockaddr_in peer;
        socklen_t len = sizeof peer;
        ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&peer, &len);
        if (n >= 0) sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&peer, len);
    }
}
