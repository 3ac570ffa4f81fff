/*
 * echo_server: a minimal, fast, raw JSON-RPC 2.0 MCP server over stdio.
 *
 * Newline-delimited messages. For each line it finds the top-level "id"
 * (kept as its raw token) and "method", and answers:
 *   initialize  -> InitializeResult (protocolVersion 2025-11-25, tools capability)
 *   tools/list  -> one tool, "echo"
 *   tools/call  -> {"jsonrpc":"2.0","id":<id>,"result":{"content":[{"type":"text","text":"<payload>"}]}}
 *                  where the payload is N bytes of ASCII [a-z0-9] (no escaping needed),
 *                  N taken from the first "size":N in the params (default 16).
 *   ping        -> empty result
 *   other requests -> error -32601
 * Notifications (no id) and responses (no method) are ignored.
 *
 * Small answers are batched into one write per burst of input; large ones
 * (> 64 KiB) go out with writev straight from a shared payload buffer.
 *
 * Build: cc -O2 -o echo_server echo_server.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define DEFAULT_SIZE 16
#define MAX_SIZE ((size_t)1 << 30)
#define BIG_REPLY (64 * 1024)

static char *in_buf;
static size_t in_cap, in_len, in_start, in_scanned;

static char *out_buf;
static size_t out_cap, out_len;

static char *payload;
static size_t payload_len;

static void die_quietly(void) { _exit(0); }

static void write_all(const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            die_quietly(); /* EPIPE: the client is gone */
        }
        p += w;
        n -= (size_t)w;
    }
}

static void writev_all(struct iovec *iov, int cnt) {
    while (cnt > 0) {
        ssize_t w = writev(STDOUT_FILENO, iov, cnt);
        if (w < 0) {
            if (errno == EINTR) continue;
            die_quietly();
        }
        while (cnt > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
}

static void flush_out(void) {
    if (out_len) write_all(out_buf, out_len);
    out_len = 0;
}

static void out_append(const char *p, size_t n) {
    if (out_len + n > out_cap) {
        flush_out();
        if (n > out_cap) {
            write_all(p, n);
            return;
        }
    }
    memcpy(out_buf + out_len, p, n);
    out_len += n;
}

static void out_str(const char *s) { out_append(s, strlen(s)); }

static void ensure_payload(size_t n) {
    if (n <= payload_len) return;
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    char *p = realloc(payload, n);
    if (!p) {
        fprintf(stderr, "echo_server: out of memory for %zu bytes\n", n);
        exit(1);
    }
    for (size_t i = payload_len; i < n; i++) p[i] = alphabet[i % (sizeof alphabet - 1)];
    payload = p;
    payload_len = n;
}

/* ---- a tiny JSON skimmer: just enough to find top-level keys ---- */

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
    return i;
}

/* s[i] == '"'; returns index just past the closing quote (or n). */
static size_t skip_string(const char *s, size_t n, size_t i) {
    i++;
    while (i < n) {
        if (s[i] == '\\') i += 2;
        else if (s[i] == '"') return i + 1;
        else i++;
    }
    return n;
}

/* Returns index just past the value starting at i. */
static size_t skip_value(const char *s, size_t n, size_t i) {
    if (i >= n) return n;
    if (s[i] == '"') return skip_string(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = skip_string(s, n, i);
                continue;
            }
            if (c == '{' || c == '[') depth++;
            else if (c == '}' || c == ']') {
                depth--;
                if (depth == 0) return i + 1;
            }
            i++;
        }
        return n;
    }
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
           s[i] != '\r' && s[i] != '\n')
        i++;
    return i;
}

typedef struct {
    const char *p;
    size_t n;
} span;

static int span_eq(span a, const char *lit) {
    size_t l = strlen(lit);
    return a.p && a.n == l && memcmp(a.p, lit, l) == 0;
}

static size_t find_size(span params) {
    if (!params.p) return DEFAULT_SIZE;
    const char *key = "\"size\"";
    const char *p = memmem(params.p, params.n, key, 6);
    if (!p) return DEFAULT_SIZE;
    size_t n = params.n, i = (size_t)(p - params.p) + 6;
    i = skip_ws(params.p, n, i);
    if (i >= n || params.p[i] != ':') return DEFAULT_SIZE;
    i = skip_ws(params.p, n, i + 1);
    size_t v = 0;
    int digits = 0;
    while (i < n && params.p[i] >= '0' && params.p[i] <= '9') {
        v = v * 10 + (size_t)(params.p[i] - '0');
        if (v > MAX_SIZE) v = MAX_SIZE;
        i++;
        digits++;
    }
    return digits ? v : DEFAULT_SIZE;
}

static void reply_head(span id) {
    out_str("{\"jsonrpc\":\"2.0\",\"id\":");
    out_append(id.p, id.n);
}

static void handle_line(const char *s, size_t n) {
    size_t i = skip_ws(s, n, 0);
    if (i >= n || s[i] != '{') return; /* blank line or not an object: ignore */
    span id = {0}, method = {0}, params = {0};
    i++;
    for (;;) {
        i = skip_ws(s, n, i);
        if (i >= n || s[i] == '}') break;
        if (s[i] != '"') return;
        size_t kend = skip_string(s, n, i);
        span key = {s + i + 1, kend >= i + 2 ? kend - i - 2 : 0};
        i = skip_ws(s, n, kend);
        if (i >= n || s[i] != ':') return;
        i = skip_ws(s, n, i + 1);
        size_t vstart = i;
        i = skip_value(s, n, i);
        span val = {s + vstart, i - vstart};
        if (span_eq(key, "id")) id = val;
        else if (span_eq(key, "method")) {
            if (val.n >= 2 && val.p[0] == '"') {
                method.p = val.p + 1;
                method.n = val.n - 2;
            }
        } else if (span_eq(key, "params")) params = val;
        i = skip_ws(s, n, i);
        if (i < n && s[i] == ',') i++;
    }
    if (!id.p || !method.p) return; /* notification or response */

    if (span_eq(method, "tools/call")) {
        size_t size = find_size(params);
        static const char mid[] = ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"";
        static const char tail[] = "\"}]}}\n";
        if (size + 128 > BIG_REPLY) {
            ensure_payload(size);
            flush_out();
            char head[256];
            int hl = snprintf(head, sizeof head, "{\"jsonrpc\":\"2.0\",\"id\":%.*s%s", (int)id.n, id.p, mid);
            if (hl < 0 || (size_t)hl >= sizeof head) return;
            struct iovec iov[3] = {
                {head, (size_t)hl},
                {payload, size},
                {(void *)tail, sizeof tail - 1},
            };
            writev_all(iov, 3);
        } else {
            ensure_payload(size);
            reply_head(id);
            out_append(mid, sizeof mid - 1);
            out_append(payload, size);
            out_append(tail, sizeof tail - 1);
        }
    } else if (span_eq(method, "initialize")) {
        reply_head(id);
        out_str(",\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"tools\":{}},"
                "\"serverInfo\":{\"name\":\"bir-bench-echo\",\"version\":\"0.1.0\"}}}\n");
    } else if (span_eq(method, "tools/list")) {
        reply_head(id);
        out_str(",\"result\":{\"tools\":[{\"name\":\"echo\",\"description\":\"Returns `size` bytes of "
                "ASCII text.\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"size\":{\"type\":"
                "\"integer\",\"minimum\":0}}}}]}}\n");
    } else if (span_eq(method, "ping")) {
        reply_head(id);
        out_str(",\"result\":{}}\n");
    } else {
        reply_head(id);
        out_str(",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}\n");
    }
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    in_cap = 1 << 20;
    in_buf = malloc(in_cap);
    out_cap = 1 << 20;
    out_buf = malloc(out_cap);
    if (!in_buf || !out_buf) return 1;

    for (;;) {
        /* Answer every complete line we hold, then flush once. */
        for (;;) {
            char *nl = memchr(in_buf + in_scanned, '\n', in_len - in_scanned);
            if (!nl) {
                in_scanned = in_len;
                break;
            }
            size_t end = (size_t)(nl - in_buf);
            handle_line(in_buf + in_start, end - in_start);
            in_start = end + 1;
            in_scanned = in_start;
        }
        flush_out();

        if (in_start > 0) {
            memmove(in_buf, in_buf + in_start, in_len - in_start);
            in_len -= in_start;
            in_scanned -= in_start;
            in_start = 0;
        }
        if (in_len == in_cap) {
            char *p = realloc(in_buf, in_cap * 2);
            if (!p) return 1;
            in_buf = p;
            in_cap *= 2;
        }
        ssize_t r = read(STDIN_FILENO, in_buf + in_len, in_cap - in_len);
        if (r < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        if (r == 0) break;
        in_len += (size_t)r;
    }
    if (in_len > in_start) handle_line(in_buf + in_start, in_len - in_start);
    flush_out();
    return 0;
}
