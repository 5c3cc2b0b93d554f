/* A diagnostic, not part of the benchmark's table: an LD_PRELOAD shim that sets
 * TCP_NODELAY on every socket a server accepts, to measure what Nagle's algorithm
 * costs a server that does not set it (`lmstack serve` as of this benchmark:
 * axum::serve leaves it off unless the listener is tapped).
 *
 *   cc -O2 -shared -fPIC -o nodelay.so nodelay.c -ldl
 *   LD_PRELOAD=$PWD/nodelay.so lmstack serve --config …
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static void nodelay(int fd) {
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
    static int (*real)(int, struct sockaddr *, socklen_t *);
    if (!real) real = dlsym(RTLD_NEXT, "accept");
    int client = real(fd, addr, len);
    nodelay(client);
    return client;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    static int (*real)(int, struct sockaddr *, socklen_t *, int);
    if (!real) real = dlsym(RTLD_NEXT, "accept4");
    int client = real(fd, addr, len, flags);
    nodelay(client);
    return client;
}
