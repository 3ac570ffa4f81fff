/*
 * latency_client: sequential tiny tools/call round trips through a relay,
 * for measuring what recording costs per call (bench/README.md, "What
 * recording costs per call").
 *
 *   latency_client [-n CALLS] [-w WARMUP] [-s SIZE] [-q MS] [-o FILE] -- CMD...
 *
 * Spawns CMD (e.g. `bir proxy -- echo_server`) with pipes, sends
 * initialize + notifications/initialized, WARMUP calls, then CALLS timed
 * calls (write the request, read the whole answer line), the same
 * 16-byte-payload request as benches/relay.rs. Prints one line:
 *   p50 p90 p99 p999 max (µs) and, per thread of CMD, its CPU time
 *   (/proc/PID/task/TID/schedstat) over the timed calls plus a quiet
 *   period of MS milliseconds after them (default 300: the recorder
 *   records its backlog in the next pause), divided by CALLS; and how
 *   often each thread but the relay's own (`*from-*`) was switched in or
 *   out during the timed calls (/proc/PID/task/TID/sched): the wake-ups
 *   recording costs a burst, whatever the machine's load.
 * With -r R and -p MS, the timed calls come in R rounds with an MS
 * millisecond pause between them (as benches/relay.rs does, whose settle
 * waits for the relay's process tree to be idle); -q 0 leaves no pause
 * after the warm-up, as the relay bench leaves none; -S MS also stops the
 * relay (SIGSTOP) for MS milliseconds after each pause, as the relay bench
 * does while it measures the other columns.
 * With -o, also writes every timed call to FILE, one a line: its latency
 * in ns and, with -t, its start (CLOCK_MONOTONIC ns, to line up with a
 * `perf record -k mono` trace).
 * When BENCH_PERF_PID_FILE is set, writes CMD's pid there after the
 * warm-up and sleeps BENCH_PERF_DELAY_MS (default 0), so that a
 * `perf stat -p`/`perf record -p` started from outside covers the timed calls.
 *
 * Build: cc -O2 -o latency_client latency_client.c
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int to_child, from_child;
static char buf[1 << 20];
static size_t have, start;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void write_all(const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(to_child, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            perror("write");
            exit(1);
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Reads one line; returns its length (without the newline). */
static size_t read_line(void) {
    for (;;) {
        char *nl = memchr(buf + start, '\n', have - start);
        if (nl) {
            size_t len = (size_t)(nl - (buf + start));
            start += len + 1;
            return len;
        }
        if (start > 0) {
            memmove(buf, buf + start, have - start);
            have -= start;
            start = 0;
        }
        if (have == sizeof buf) {
            fprintf(stderr, "line too long\n");
            exit(1);
        }
        ssize_t r = read(from_child, buf + have, sizeof buf - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            fprintf(stderr, "EOF from the relay\n");
            exit(1);
        }
        have += (size_t)r;
    }
}

static void call(long id, int size) {
    char req[256];
    int n = snprintf(req, sizeof req,
                     "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":"
                     "{\"name\":\"echo\",\"arguments\":{\"size\":%d}}}\n",
                     id, size);
    write_all(req, (size_t)n);
    read_line();
}

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

#define MAX_THREADS 64
struct thread_cpu {
    long tid;
    char name[32];
    long long ns;
    long long switches;
};

static int threads_cpu(pid_t pid, struct thread_cpu *out) {
    char path[128];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_THREADS) {
        if (e->d_name[0] == '.') continue;
        long tid = atol(e->d_name);
        char p[160];
        FILE *f;
        snprintf(p, sizeof p, "/proc/%d/task/%ld/schedstat", pid, tid);
        if (!(f = fopen(p, "r"))) continue;
        long long ns = 0;
        if (fscanf(f, "%lld", &ns) != 1) ns = 0;
        fclose(f);
        out[n].switches = 0;
        snprintf(p, sizeof p, "/proc/%d/task/%ld/sched", pid, tid);
        if ((f = fopen(p, "r"))) {
            char line[256];
            while (fgets(line, sizeof line, f)) {
                if (!strncmp(line, "nr_switches", 11)) {
                    char *colon = strchr(line, ':');
                    if (colon) out[n].switches = atoll(colon + 1);
                }
            }
            fclose(f);
        }
        snprintf(p, sizeof p, "/proc/%d/task/%ld/comm", pid, tid);
        out[n].name[0] = 0;
        if ((f = fopen(p, "r"))) {
            if (fgets(out[n].name, sizeof out[n].name, f))
                out[n].name[strcspn(out[n].name, "\n")] = 0;
            fclose(f);
        }
        out[n].tid = tid;
        out[n].ns = ns;
        n++;
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv) {
    long calls = 5000, warmup = 500, rounds = 1;
    int pause_ms = 0, stop_ms = 0;
    int size = 16, quiet_ms = 300;
    const char *out_file = NULL;
    int with_start = 0;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (i + 1 >= argc) break;
        if (!strcmp(argv[i], "-n")) calls = atol(argv[++i]);
        else if (!strcmp(argv[i], "-w")) warmup = atol(argv[++i]);
        else if (!strcmp(argv[i], "-s")) size = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-q")) quiet_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-o")) out_file = argv[++i];
        else if (!strcmp(argv[i], "-t")) with_start = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r")) rounds = atol(argv[++i]);
        else if (!strcmp(argv[i], "-p")) pause_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-S")) stop_ms = atoi(argv[++i]);
    }
    if (i >= argc - 1 || calls <= 0) {
        fprintf(stderr, "usage: latency_client [-n N] [-w N] [-s SIZE] [-q MS] [-r R -p MS [-S MS]] [-o FILE [-t 1]] -- CMD...\n");
        return 2;
    }
    char **cmd = argv + i + 1;
    int in_pipe[2], out_pipe[2];
    if (pipe(in_pipe) || pipe(out_pipe)) {
        perror("pipe");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in_pipe[0], 0);
        dup2(out_pipe[1], 1);
        close(in_pipe[0]);
        close(in_pipe[1]);
        close(out_pipe[0]);
        close(out_pipe[1]);
        execvp(cmd[0], cmd);
        perror("exec");
        _exit(127);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    to_child = in_pipe[1];
    from_child = out_pipe[0];

    const char *init =
        "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
        "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"latency\",\"version\":\"1\"}}}\n"
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    write_all(init, strlen(init));
    read_line();
    long id = 1;
    for (long k = 0; k < warmup; k++) call(id++, size);
    /* Let the warm-up's recording finish before the timed part. */
    if (quiet_ms > 0) usleep((useconds_t)quiet_ms * 1000);

    const char *pid_file = getenv("BENCH_PERF_PID_FILE");
    if (pid_file) {
        FILE *f = fopen(pid_file, "w");
        if (f) {
            fprintf(f, "%d\n", pid);
            fclose(f);
        }
        const char *delay = getenv("BENCH_PERF_DELAY_MS");
        if (delay) usleep((useconds_t)atoi(delay) * 1000);
    }

    struct thread_cpu before[MAX_THREADS], after[MAX_THREADS];
    int nb = threads_cpu(pid, before);
    long long *lat = malloc(sizeof(long long) * (size_t)calls);
    long long *at = malloc(sizeof(long long) * (size_t)calls);
    if (!lat || !at) return 1;
    long long t_start = now_ns();
    for (long k = 0; k < calls; k++) {
        if (rounds > 1 && k > 0 && k % (calls / rounds) == 0) {
            if (pause_ms > 0) usleep((useconds_t)pause_ms * 1000);
            if (stop_ms > 0) {
                /* As the relay bench isolates a column: stopped while the
                 * others are measured, continued for its next round. */
                kill(pid, SIGSTOP);
                usleep((useconds_t)stop_ms * 1000);
                kill(pid, SIGCONT);
            }
        }
        long long t0 = now_ns();
        call(id++, size);
        lat[k] = now_ns() - t0;
        at[k] = t0;
    }
    long long wall = now_ns() - t_start;
    struct thread_cpu mid[MAX_THREADS];
    int nm = threads_cpu(pid, mid);
    usleep((useconds_t)quiet_ms * 1000);
    int na = threads_cpu(pid, after);

    if (out_file) {
        FILE *f = fopen(out_file, "w");
        if (f) {
            for (long k = 0; k < calls; k++) {
                if (with_start) fprintf(f, "%lld %lld\n", lat[k], at[k]);
                else fprintf(f, "%lld\n", lat[k]);
            }
            fclose(f);
        }
    }
    qsort(lat, (size_t)calls, sizeof *lat, cmp);
#define PCT(q) (lat[(long)((double)calls * (q)) < calls ? (long)((double)calls * (q)) : calls - 1] / 1000.0)
    printf("p50 %.1f p90 %.1f p99 %.1f p999 %.1f max %.1f us; %.1f us/call wall;", PCT(0.5), PCT(0.9),
           PCT(0.99), PCT(0.999), lat[calls - 1] / 1000.0, wall / 1000.0 / (double)calls);
    for (int a = 0; a < na; a++) {
        long long prev = 0;
        for (int b = 0; b < nb; b++)
            if (before[b].tid == after[a].tid) prev = before[b].ns;
        printf(" %s %.2f", after[a].name, (double)(after[a].ns - prev) / 1000.0 / (double)calls);
    }
    printf(" us-cpu/call; switches during the calls:");
    for (int a = 0; a < nm; a++) {
        long long prev = 0;
        for (int b = 0; b < nb; b++)
            if (before[b].tid == mid[a].tid) prev = before[b].switches;
        if (mid[a].switches - prev > 0 && strstr(mid[a].name, "from-") == NULL)
            printf(" %s %lld", mid[a].name, mid[a].switches - prev);
    }
    printf("\n");
    close(to_child);
    int status;
    waitpid(pid, &status, 0);
    return 0;
}
