/*
 * pump: the floor any stdio relay pays.
 *
 *   pump [ignored args...] -- CMD ARGS...
 *
 * Spawns CMD with pipes for stdin and stdout, then copies
 *   our stdin  -> child's stdin   (a second thread)
 *   child's stdout -> our stdout  (the main thread)
 * with plain read/write loops over 64 KiB buffers. No parsing, no framing.
 * The child's stderr is our stderr (inherited), so it passes straight through.
 * Exits with the child's exit status (128+signal if it was killed).
 *
 * Everything before the first "--" is ignored, so the pump can stand in for
 * `bir proxy [--server-name N] [--transcript F] -- CMD ...` in the benchmark
 * before the real proxy exists.
 *
 * Build: cc -O2 -pthread -o pump pump.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUF_SIZE (64 * 1024)

static int child_stdin = -1;

/* Copy from -> to until EOF or an error on either side. */
static void copy_fd(int from, int to) {
    static __thread char buf[BUF_SIZE];
    for (;;) {
        ssize_t n = read(from, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            return;
        }
        if (n == 0) return;
        char *p = buf;
        while (n > 0) {
            ssize_t w = write(to, p, (size_t)n);
            if (w < 0) {
                if (errno == EINTR) continue;
                return;
            }
            p += w;
            n -= w;
        }
    }
}

static void *stdin_pump(void *arg) {
    (void)arg;
    copy_fd(STDIN_FILENO, child_stdin);
    close(child_stdin); /* EOF to the child */
    return NULL;
}

int main(int argc, char **argv) {
    int start = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            start = i + 1;
            break;
        }
    }
    if (start >= argc) {
        fprintf(stderr, "usage: pump [ignored...] -- CMD [ARGS...]\n");
        return 2;
    }

    int in_pipe[2], out_pipe[2];
    if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
        perror("pump: pipe");
        return 1;
    }

    pid_t pid = fork();
    if (pid < 0) {
        perror("pump: fork");
        return 1;
    }
    if (pid == 0) {
        /* dup2 clears O_CLOEXEC on the new descriptors. */
        if (dup2(in_pipe[0], STDIN_FILENO) < 0 || dup2(out_pipe[1], STDOUT_FILENO) < 0) {
            perror("pump: dup2");
            _exit(127);
        }
        execvp(argv[start], argv + start);
        fprintf(stderr, "pump: exec %s: %s\n", argv[start], strerror(errno));
        _exit(127);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    child_stdin = in_pipe[1];

    /* A vanished reader must show up as EPIPE, not kill the pump. */
    signal(SIGPIPE, SIG_IGN);

    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    if (pthread_create(&t, &attr, stdin_pump, NULL) != 0) {
        perror("pump: pthread_create");
        return 1;
    }
    pthread_detach(t);

    copy_fd(out_pipe[0], STDOUT_FILENO);
    close(out_pipe[0]);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return 1;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}
