/* The action wrapper's front door, in C: client.py's protocol without an interpreter's start.
 *
 *   buildgen-client --python PYTHON --worker IDENTITY exec|stage ARGUMENTS...
 *
 * Exactly what buildgen/worker/client.py does (read it first: it is the reference, and the
 * server speaks to both): connect to the warm worker serving IDENTITY in the private worker
 * folder, pass it the action's argv, environment, working directory, umask and this
 * process's stdin/stdout/stderr (SCM_RIGHTS), forward interrupts to the action's process
 * group, and exit with its status. Where no worker answers, start one in the background
 * (at most once per 30 s) and run the action the usual way by exec'ing PYTHON. A Python
 * client costs an interpreter's start on every action (~20 ms); this costs a fork.
 *
 * The request is a marshal-format dict, which the worker (this very PYTHON) loads with
 * marshal.loads: a dict of str keys; strings as TYPE_UNICODE ('u', a 32-bit little-endian
 * length, UTF-8), argv as a list ('['), umask as an int ('i'). A value that is not UTF-8 makes
 * the worker refuse the request, and the action runs cold: nothing is ever lost.
 *
 * gen compiles this file into the build folder (buildgen/worker/native.py); where no C
 * compiler works, build.ninja keeps the Python client.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define SPAWN_BACKOFF_S 30
#define REPLY_BYTES 5
#define MAX_ADDRESS 107

typedef struct buffer {
    char *data;
    size_t size, capacity;
} buffer;

static int put(buffer *b, const void *data, size_t size)
{
    if (b->size + size > b->capacity) {
        size_t capacity = b->capacity ? b->capacity : 4096;
        while (capacity < b->size + size) capacity *= 2;
        char *grown = realloc(b->data, capacity);
        if (!grown) return -1;
        b->data = grown;
        b->capacity = capacity;
    }
    memcpy(b->data + b->size, data, size);
    b->size += size;
    return 0;
}

static int put_int32(buffer *b, uint32_t value)
{
    unsigned char le[4] = {value & 0xff, (value >> 8) & 0xff, (value >> 16) & 0xff, value >> 24};
    return put(b, le, 4);
}

static int put_text(buffer *b, const char *text, size_t size)
{
    return put(b, "u", 1) || put_int32(b, (uint32_t)size) || put(b, text, size);
}

static int put_string(buffer *b, const char *text) { return put_text(b, text, strlen(text)); }

/* The marshal form of {"mode", "argv", "cwd", "env", "umask"}, as client.py sends it. */
static int request(buffer *b, const char *mode, int argc, char **argv)
{
    char cwd[8192];
    mode_t mask = umask(022);
    umask(mask);
    if (!getcwd(cwd, sizeof cwd)) return -1;
    if (put(b, "{", 1) || put_string(b, "mode") || put_string(b, mode)) return -1;
    if (put_string(b, "argv") || put(b, "[", 1) || put_int32(b, (uint32_t)argc)) return -1;
    for (int i = 0; i < argc; ++i)
        if (put_string(b, argv[i])) return -1;
    if (put_string(b, "cwd") || put_string(b, cwd) || put_string(b, "env") || put(b, "{", 1))
        return -1;
    for (char **e = environ; *e; ++e) {
        const char *equals = strchr(*e, '=');
        if (!equals) continue;
        if (put_text(b, *e, (size_t)(equals - *e)) || put_string(b, equals + 1)) return -1;
    }
    if (put(b, "0", 1) || put_string(b, "umask") || put(b, "i", 1)
        || put_int32(b, (uint32_t)mask) || put(b, "0", 1))
        return -1;
    return 0;
}

static int worker_dir(char *folder, size_t size)
{
    const char *configured = getenv("BUILDGEN_WORKER_DIR");
    const char *tmp = getenv("TMPDIR");
    int n = configured && *configured
        ? snprintf(folder, size, "%s", configured)
        : snprintf(folder, size, "%s/buildgen-workers-%u", tmp && *tmp ? tmp : "/tmp",
                   (unsigned)getuid());
    if (n < 0 || (size_t)n >= size) return -1;
    /* os.makedirs(folder, 0o700, exist_ok=True), as client.py: parents too. */
    for (char *slash = strchr(folder + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        int made = mkdir(folder, 0777) == 0 || errno == EEXIST;
        *slash = '/';
        if (!made) return -1;
    }
    if (mkdir(folder, 0700) != 0 && errno != EEXIST) return -1;
    struct stat info;
    if (lstat(folder, &info) != 0) return -1;
    /* Anyone else's folder, or one others may write into, could hold their socket. */
    if (info.st_uid != getuid() || (info.st_mode & 077) || !S_ISDIR(info.st_mode)) return -1;
    return 0;
}

static int connect_worker(const char *folder, const char *identity)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    char path[8192];
    int handle = -1;
    int n = snprintf(path, sizeof path, "%s/%s.sock", folder, identity);
    if (n < 0 || (size_t)n >= sizeof path) return -1;
    if (strlen(path) > MAX_ADDRESS) { /* the folder through its descriptor: a short path */
        handle = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (handle < 0) return -1;
        snprintf(path, sizeof path, "/proc/self/fd/%d/%s.sock", handle, identity);
    }
    snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
    int conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (conn >= 0 && connect(conn, (struct sockaddr *)&address, sizeof address) != 0) {
        close(conn);
        conn = -1;
    }
    if (handle >= 0) close(handle);
    return conn;
}

static void start_worker(const char *python, const char *folder, const char *identity)
{
    char stamp[8192], log[8192];
    struct stat info;
    snprintf(stamp, sizeof stamp, "%s/%s.started", folder, identity);
    snprintf(log, sizeof log, "%s/%s.log", folder, identity);
    if (stat(stamp, &info) == 0 && time(NULL) - info.st_mtime < SPAWN_BACKOFF_S) return;
    int touch = open(stamp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (touch >= 0) close(touch);
    int log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (log_fd < 0 || null_fd < 0) goto done;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, null_fd, 0);
    posix_spawn_file_actions_adddup2(&actions, null_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
    posix_spawnattr_init(&attr);
    /* A session of its own: ninja's Ctrl-C and the end of this build leave it alone. */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    char *argv[] = {(char *)python, "-m", "buildgen.worker.server", (char *)folder,
                    (char *)identity, NULL};
    pid_t pid;
    posix_spawn(&pid, python, &actions, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
done:
    if (log_fd >= 0) close(log_fd);
    if (null_fd >= 0) close(null_fd);
}

static ssize_t read_fully(int fd, unsigned char *data, size_t size)
{
    size_t got = 0;
    while (got < size) {
        ssize_t n = recv(fd, data + got, size - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static int send_fully(int fd, const char *data, size_t size)
{
    while (size) {
        ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        data += n;
        size -= (size_t)n;
    }
    return 0;
}

static uint32_t big_endian(const unsigned char *data)
{
    return (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 | (uint32_t)data[2] << 8 | data[3];
}

static volatile sig_atomic_t group = 0, interrupted = 0;

/* ninja interrupts its own process group; the action runs in the worker's. */
static void forward(int signum)
{
    interrupted = signum;
    if (group > 0) kill(-group, signum);
}

/* The action's exit status, or -1 when the worker did not take it (nothing ran). */
static int converse(int conn, const buffer *message)
{
    unsigned char header[4] = {message->size >> 24, (message->size >> 16) & 0xff,
                               (message->size >> 8) & 0xff, message->size & 0xff};
    int fds[3] = {0, 1, 2};
    char control[CMSG_SPACE(sizeof fds)];
    memset(control, 0, sizeof control);
    struct iovec part = {.iov_base = header, .iov_len = sizeof header};
    struct msghdr msg = {.msg_iov = &part, .msg_iovlen = 1, .msg_control = control,
                         .msg_controllen = sizeof control};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(cmsg), fds, sizeof fds);
    if (sendmsg(conn, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof header) return -1;
    if (send_fully(conn, message->data, message->size) != 0) return -1;
    unsigned char reply[REPLY_BYTES];
    if (read_fully(conn, reply, REPLY_BYTES) != REPLY_BYTES || reply[0] != 'P') return -1;
    group = (pid_t)big_endian(reply + 1);
    struct sigaction action = {.sa_handler = forward, .sa_flags = SA_RESTART};
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGHUP, &action, NULL);
    if (read_fully(conn, reply, REPLY_BYTES) == REPLY_BYTES && reply[0] == 'X')
        return (int)big_endian(reply + 1);
    if (interrupted) return 128 + interrupted;
    /* The worker's process died mid-action: actions write atomically and are pure
     * functions of their inputs, so running it again here is safe. */
    return -1;
}

static int run_cold(const char *python, const char *mode, int argc, char **argv)
{
    char **cold = calloc((size_t)argc + 6, sizeof *cold);
    if (!cold) return 127;
    int n = 0;
    cold[n++] = (char *)python;
    cold[n++] = "-m";
    if (strcmp(mode, "exec") == 0) {
        cold[n++] = "buildgen.cache";
        cold[n++] = "exec";
    } else {
        cold[n++] = "buildgen.stages";
    }
    for (int i = 0; i < argc; ++i) cold[n++] = argv[i];
    execv(python, cold);
    fprintf(stderr, "error: %s: %s\n", python, strerror(errno));
    return 127;
}

static int valid_identity(const char *identity)
{
    size_t n = strlen(identity);
    if (n == 0 || n > 64) return 0;
    return strspn(identity, "0123456789abcdef") == n;
}

static int workers_off(void)
{
    const char *value = getenv("BUILDGEN_WORKERS");
    if (!value) return 0;
    const char *off[] = {"off", "0", "no", "false"};
    for (size_t i = 0; i < sizeof off / sizeof *off; ++i)
        if (strcasecmp(value, off[i]) == 0) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 6 || strcmp(argv[1], "--python") != 0 || strcmp(argv[3], "--worker") != 0
        || (strcmp(argv[5], "exec") != 0 && strcmp(argv[5], "stage") != 0)) {
        fprintf(stderr, "buildgen worker client: expected --python <python> --worker "
                        "<identity> exec|stage <arguments>\n");
        return 2;
    }
    const char *python = argv[2], *identity = argv[4], *mode = argv[5];
    int rest = argc - 6;
    char **args = argv + 6;
    char folder[4096];
    if (valid_identity(identity) && !workers_off() && worker_dir(folder, sizeof folder) == 0) {
        int conn = connect_worker(folder, identity);
        if (conn < 0) {
            start_worker(python, folder, identity);
        } else {
            buffer message = {0};
            int code = request(&message, mode, rest, args) == 0 ? converse(conn, &message) : -1;
            close(conn);
            free(message.data);
            if (code >= 0) return code;
        }
    }
    return run_cold(python, mode, rest, args);
}
