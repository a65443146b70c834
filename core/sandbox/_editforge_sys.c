/* The few system calls the sandbox server and its children make, as narrow functions.
 *
 * The server used to reach them through ctypes, which left a general raw-memory primitive
 * loaded in every sandboxed program (reachable without an import through
 * object.__subclasses__()). Every function here takes integers, a path's descriptor or a byte
 * string, never an address: nothing in this module reads or writes memory a caller names (but
 * guard_forks, which zeroes a bytearray's own buffer in forked children, and arms once).
 * Built on first use for each interpreter by core/sandbox/native.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#define LANDLOCK_CREATE_RULESET_VERSION 1
#define LANDLOCK_RULE_PATH_BENEATH 1

struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

static PyObject *fail(const char *what) { return PyErr_SetFromErrnoWithFilename(PyExc_OSError, what); }

static PyObject *set_no_new_privs(PyObject *self, PyObject *unused) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return fail("prctl(PR_SET_NO_NEW_PRIVS)");
    Py_RETURN_NONE;
}

/* prctl options that take a plain integer; options that take an address are not offered, nor
 * PR_SET_DUMPABLE: a run that made itself dumpable again could let a process it starts (an
 * interpreter without the audit hook) read its memory. */
static PyObject *prctl_set(PyObject *self, PyObject *args) {
    int option;
    unsigned long value;
    if (!PyArg_ParseTuple(args, "ik", &option, &value)) return NULL;
    if (option != PR_SET_PDEATHSIG && option != PR_SET_CHILD_SUBREAPER) {
        PyErr_Format(PyExc_ValueError, "prctl option %d is not offered", option);
        return NULL;
    }
    if (prctl(option, value, 0, 0, 0)) return fail("prctl");
    Py_RETURN_NONE;
}

/* No ptrace, no /proc/<pid>/mem, no process_vm_readv of this process by another of its user. */
static PyObject *set_undumpable(PyObject *self, PyObject *unused) {
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) return fail("prctl(PR_SET_DUMPABLE)");
    Py_RETURN_NONE;
}

static PyObject *unshare_(PyObject *self, PyObject *args) {
    int flags;
    if (!PyArg_ParseTuple(args, "i", &flags)) return NULL;
    if (unshare(flags)) return fail("unshare");
    Py_RETURN_NONE;
}

static PyObject *landlock_abi(PyObject *self, PyObject *unused) {
    long version = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return PyLong_FromLong(version < 0 ? 0 : version);
}

static PyObject *landlock_create_ruleset(PyObject *self, PyObject *args) {
    struct ruleset_attr attr = {0, 0, 0};
    if (!PyArg_ParseTuple(args, "KK", &attr.handled_access_fs, &attr.scoped)) return NULL;
    size_t size = attr.scoped ? sizeof(attr) : sizeof(attr.handled_access_fs); /* older kernels: 8 */
    long fd = syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (fd < 0) return fail("landlock_create_ruleset");
    return PyLong_FromLong(fd);
}

static PyObject *landlock_add_path(PyObject *self, PyObject *args) {
    int ruleset, parent;
    struct path_beneath rule;
    if (!PyArg_ParseTuple(args, "iiK", &ruleset, &parent, &rule.allowed_access)) return NULL;
    rule.parent_fd = parent;
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0)) return fail("landlock_add_rule");
    Py_RETURN_NONE;
}

static PyObject *landlock_restrict(PyObject *self, PyObject *args) {
    int ruleset;
    if (!PyArg_ParseTuple(args, "i", &ruleset)) return NULL;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return fail("prctl(PR_SET_NO_NEW_PRIVS)");
    if (syscall(SYS_landlock_restrict_self, ruleset, 0)) return fail("landlock_restrict_self");
    Py_RETURN_NONE;
}

/* A classic-BPF program (8-byte instructions, as seccomp.py assembles them). */
static PyObject *seccomp_install(PyObject *self, PyObject *args) {
    Py_buffer program;
    if (!PyArg_ParseTuple(args, "y*", &program)) return NULL;
    if (program.len == 0 || program.len % sizeof(struct sock_filter) || program.len / sizeof(struct sock_filter) > BPF_MAXINSNS) {
        PyBuffer_Release(&program);
        PyErr_SetString(PyExc_ValueError, "a seccomp program is a non-empty multiple of 8 bytes");
        return NULL;
    }
    struct sock_fprog fprog = {(unsigned short)(program.len / sizeof(struct sock_filter)), (struct sock_filter *)program.buf};
    int failed = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0);
    PyBuffer_Release(&program);
    if (failed) return fail("prctl(PR_SET_SECCOMP)");
    Py_RETURN_NONE;
}

static PyObject *drop_capabilities(PyObject *self, PyObject *unused) {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {{0, 0, 0}, {0, 0, 0}};
    if (syscall(SYS_capset, &header, data)) return fail("capset");
    Py_RETURN_NONE;
}

/* (source or None, target, fstype or None, flags, data or None): a fresh tmpfs or a bind mount
 * for each run's scratch folders (the server keeps CAP_SYS_ADMIN for this; runs drop it). */
static PyObject *mount_(PyObject *self, PyObject *args) {
    const char *source, *target, *fstype, *data;
    unsigned long flags;
    if (!PyArg_ParseTuple(args, "zszkz", &source, &target, &fstype, &flags, &data)) return NULL;
    if (mount(source, target, fstype, flags, data)) return fail(target);
    Py_RETURN_NONE;
}

static PyObject *umount2_(PyObject *self, PyObject *args) {
    const char *target;
    int flags;
    if (!PyArg_ParseTuple(args, "si", &target, &flags)) return NULL;
    if (umount2(target, flags)) return fail(target);
    Py_RETURN_NONE;
}

static PyObject *keyring_clear(PyObject *self, PyObject *args) {
    int keyring;
    if (!PyArg_ParseTuple(args, "i", &keyring)) return NULL;
    if (syscall(SYS_keyctl, 7 /* KEYCTL_CLEAR */, keyring)) return fail("keyctl(KEYCTL_CLEAR)");
    Py_RETURN_NONE;
}

/* Remove one SysV IPC object: kind is "shm", "sem" or "msg". */
static PyObject *ipc_remove(PyObject *self, PyObject *args) {
    const char *kind;
    int id, result;
    if (!PyArg_ParseTuple(args, "si", &kind, &id)) return NULL;
    if (!strcmp(kind, "shm")) result = shmctl(id, IPC_RMID, NULL);
    else if (!strcmp(kind, "sem")) result = semctl(id, 0, IPC_RMID);
    else if (!strcmp(kind, "msg")) result = msgctl(id, IPC_RMID, NULL);
    else {
        PyErr_Format(PyExc_ValueError, "unknown SysV IPC kind %s", kind);
        return NULL;
    }
    if (result) return fail("IPC_RMID");
    Py_RETURN_NONE;
}

/* Whether any SysV shared-memory segment, semaphore set or message queue exists in this IPC
 * namespace (three calls instead of reading three /proc files after every run). */
static PyObject *ipc_in_use(PyObject *self, PyObject *unused) {
    struct shm_info shm;
    struct seminfo sem;
    struct msginfo msg;
    int segments = shmctl(0, SHM_INFO, (struct shmid_ds *)&shm) >= 0 ? (int)shm.used_ids : 1;
    int sets = semctl(0, 0, SEM_INFO, &sem) >= 0 ? sem.semusz : 1;
    int queues = msgctl(0, MSG_INFO, (struct msqid_ds *)&msg) >= 0 ? msg.msgpool : 1;
    return PyBool_FromLong(segments > 0 || sets > 0 || queues > 0);
}

/* The run's pass nonce and report pipe, guarded in every fork of the run. glibc calls the child
 * handler inside fork() itself (os.fork, os.forkpty, a subprocess's preexec_fn fork), before any
 * Python code runs in the child and whatever happens to Python's own at-fork hooks, which a
 * program can make fail (a MemoryError while the interpreter copies its hook list). A fork of the
 * run therefore never holds the nonce and cannot write to the report pipe: it cannot pass on the
 * run's behalf or hand the nonce back to it. */
static volatile char *guarded_nonce = NULL;
static Py_ssize_t guarded_length = 0;
static int guarded_report_fd = -1;
static PyObject *guarded_owner = NULL; /* keeps the nonce's buffer alive */
static int fork_guard_registered = 0;

static void zero_in_forked_child(void) {
    for (Py_ssize_t i = 0; i < guarded_length; i++) guarded_nonce[i] = 0;
    if (guarded_report_fd >= 0) close(guarded_report_fd);
}

/* (bytearray, report fd): armed once per process. The run's child arms it before the program
 * starts; a later call (the program loading this module itself) is refused, so the guard cannot
 * be pointed at another buffer or descriptor. */
static PyObject *guard_forks(PyObject *self, PyObject *args) {
    PyObject *nonce;
    int report_fd;
    if (!PyArg_ParseTuple(args, "Yi", &nonce, &report_fd)) return NULL;
    if (guarded_owner != NULL) {
        PyErr_SetString(PyExc_PermissionError, "the fork guard is already armed in this process");
        return NULL;
    }
    if (!fork_guard_registered) {
        int error = pthread_atfork(NULL, NULL, zero_in_forked_child);
        if (error) {
            errno = error;
            return fail("pthread_atfork");
        }
        fork_guard_registered = 1;
    }
    Py_INCREF(nonce);
    guarded_owner = nonce;
    guarded_nonce = PyByteArray_AS_STRING(nonce);
    guarded_length = PyByteArray_GET_SIZE(nonce);
    guarded_report_fd = report_fd;
    Py_RETURN_NONE;
}

/* ---- the zygote's loop (zygote.py): between runs it runs no Python at all ----------------------
 *
 * Every page a Python loop writes after a fork is a copy-on-write fault while the run's process
 * lives (its refcounts, frames, the JSON it builds): 0.7 ms of the zygote's CPU per run against
 * 0.5 ms for the fork itself. This loop makes the same system calls and touches a few pages of
 * its own stack. Protocol (SOCK_SEQPACKET, one message each): from the server "F" + JSON with the
 * run's descriptors attached (fork the run's process), or "E" (kill and reap every process but
 * the server); to the server {"pid": N}, {"exited": status} when the run's process exits, and
 * {"ended": true, "status": status-or-null}. */
#define ZYGOTE_MAX_FDS 16
#define ZYGOTE_MESSAGE (1 << 16)
#define ZYGOTE_MAX_CHILDREN 4096

static int zygote_say(int sock, const char *text) {
    return send(sock, text, strlen(text), MSG_NOSIGNAL) == (ssize_t)strlen(text) ? 0 : -1;
}

/* The children of this process: from /proc/self/task/<tid>/children, or, on kernels without
 * CONFIG_PROC_CHILDREN, by scanning every process's parent. At most `max`; -1 on failure. */
static int zygote_children(pid_t *out, int max) {
    char path[64], buf[8192];
    pid_t me = getpid();
    int count = 0;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)me, (int)me);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        long value = -1;
        for (;;) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            for (ssize_t i = 0; i < n; i++) {
                if (buf[i] >= '0' && buf[i] <= '9') {
                    value = (value < 0 ? 0 : value * 10) + (buf[i] - '0');
                } else if (value >= 0) {
                    if (count < max) out[count++] = (pid_t)value;
                    value = -1;
                }
            }
        }
        if (value >= 0 && count < max) out[count++] = (pid_t)value;
        close(fd);
        return count;
    }
    DIR *proc = opendir("/proc");
    if (proc == NULL) return -1;
    struct dirent *entry;
    while ((entry = readdir(proc)) != NULL && count < max) {
        char *end;
        long pid = strtol(entry->d_name, &end, 10);
        if (*end != '\0' || pid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        int stat_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (stat_fd < 0) continue;
        ssize_t n = read(stat_fd, buf, sizeof buf - 1);
        close(stat_fd);
        if (n <= 0) continue;
        buf[n] = '\0';
        char *after = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        char state;
        int parent;
        if (after != NULL && sscanf(after + 1, " %c %d", &state, &parent) == 2 && parent == (int)me)
            out[count++] = (pid_t)pid;
    }
    closedir(proc);
    return count;
}

struct zygote_run {
    pid_t pid;  /* the run's process, 0 between runs */
    int status; /* its exit status, once reaped */
    int reaped;
};

/* Kill and reap every process but the server: orphans of a run reparent here (PID 1 or
 * subreaper), so repeating until none is left reaches all of them, setsid() or not.
 * Returns -1 when the server is gone. */
static int zygote_kill_runs(pid_t server, struct zygote_run *run) {
    static pid_t children[ZYGOTE_MAX_CHILDREN];
    if (run->pid > 0) kill(-run->pid, SIGKILL); /* most of a run's processes share its group */
    for (;;) {
        int count = zygote_children(children, ZYGOTE_MAX_CHILDREN), others = 0;
        for (int i = 0; i < count; i++) {
            if (children[i] == server) continue;
            kill(children[i], SIGKILL);
            others++;
        }
        if (count < 0 || others == 0) return 0;
        int flags = 0; /* block for one of those just killed, then take whatever else is ready */
        for (;;) {
            int status;
            pid_t pid = waitpid(-1, &status, flags);
            if (pid < 0 && errno == EINTR) continue;
            if (pid < 0) return errno == ECHILD ? -1 : 0;
            if (pid == 0) break;
            flags = WNOHANG;
            if (pid == server) return -1;
            if (pid == run->pid && !run->reaped) {
                run->status = status;
                run->reaped = 1;
            }
        }
    }
}

/* Reap what exited; -1 when the server is gone. */
static int zygote_reap(int sock, pid_t server, struct zygote_run *run) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) return -1; /* no child at all: not even the server */
        if (pid == 0) return 0;
        if (pid == server) return -1;
        if (pid == run->pid && !run->reaped) {
            char text[48];
            run->status = status;
            run->reaped = 1;
            snprintf(text, sizeof text, "{\"exited\": %d}", status);
            zygote_say(sock, text);
        }
    }
}

/* (socket fd, server pid) -> (request JSON, [descriptors]) in each forked run's process; None in
 * the zygote once the server is gone, every process left killed and reaped. SIGCHLD is blocked and read from a signalfd meanwhile; the
 * run's process gets the signal mask back. */
static PyObject *zygote_serve(PyObject *self, PyObject *args) {
    int sock;
    pid_t server;
    if (!PyArg_ParseTuple(args, "ii", &sock, &server)) return NULL;
    sigset_t chld, saved;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &chld, &saved) != 0) return fail("sigprocmask");
    int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        sigprocmask(SIG_SETMASK, &saved, NULL);
        return fail("signalfd");
    }
    static char message[ZYGOTE_MESSAGE];
    struct zygote_run run = {0, 0, 0};
    PyObject *result = NULL;
    for (;;) {
        struct pollfd ready[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(ready, 2, -1) < 0) {
            if (errno == EINTR) continue;
            result = fail("poll");
            break;
        }
        if (ready[1].revents) {
            struct signalfd_siginfo info;
            ssize_t got;
            do got = read(sfd, &info, sizeof info); /* drained: the reap below takes every exit */
            while (got > 0);
            if (zygote_reap(sock, server, &run) < 0) break;
        }
        if (!ready[0].revents) continue;
        union {
            struct cmsghdr header;
            char space[CMSG_SPACE(sizeof(int) * ZYGOTE_MAX_FDS)];
        } control;
        struct iovec io = {message, sizeof message};
        struct msghdr msg = {0};
        msg.msg_iov = &io;
        msg.msg_iovlen = 1;
        msg.msg_control = control.space;
        msg.msg_controllen = sizeof control.space;
        ssize_t size = recvmsg(sock, &msg, 0);
        if (size < 0 && errno == EINTR) continue;
        if (size <= 0) break; /* the server closed its end, or is gone */
        int fds[ZYGOTE_MAX_FDS], nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < n && nfds < ZYGOTE_MAX_FDS; i++) memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
        if (message[0] == 'F') {
            PyOS_BeforeFork();
            pid_t pid = fork();
            if (pid == 0) {
                PyOS_AfterFork_Child();
                sigprocmask(SIG_SETMASK, &saved, NULL);
                close(sfd);
                PyObject *list = PyList_New(nfds);
                for (int i = 0; list != NULL && i < nfds; i++) PyList_SET_ITEM(list, i, PyLong_FromLong(fds[i]));
                if (list == NULL) return NULL;
                return Py_BuildValue("(y#N)", message + 1, (Py_ssize_t)(size - 1), list);
            }
            int error = errno;
            PyOS_AfterFork_Parent();
            memset(message, 0, (size_t)size); /* the next run's process finds no job before its own */
            for (int i = 0; i < nfds; i++) close(fds[i]);
            if (pid < 0) {
                errno = error;
                result = fail("fork");
                break;
            }
            char text[32];
            run.pid = pid;
            run.reaped = 0;
            snprintf(text, sizeof text, "{\"pid\": %d}", (int)pid);
            if (zygote_say(sock, text) < 0) break;
        } else if (message[0] == 'E') {
            memset(message, 0, (size_t)size);
            for (int i = 0; i < nfds; i++) close(fds[i]);
            if (zygote_kill_runs(server, &run) < 0) break;
            char text[64];
            if (run.reaped)
                snprintf(text, sizeof text, "{\"ended\": true, \"status\": %d}", run.status);
            else
                snprintf(text, sizeof text, "{\"ended\": true, \"status\": null}");
            run.pid = 0;
            run.reaped = 0;
            if (zygote_say(sock, text) < 0) break;
        } else {
            for (int i = 0; i < nfds; i++) close(fds[i]);
            break; /* not our protocol: the server is broken; end as if it were gone */
        }
    }
    zygote_kill_runs(0, &run); /* the loop is over: nothing of any run outlives it (pid 0: no server to keep) */
    close(sfd);
    sigprocmask(SIG_SETMASK, &saved, NULL);
    if (result == NULL && PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_no_new_privs", set_no_new_privs, METH_NOARGS, "prctl(PR_SET_NO_NEW_PRIVS, 1)"},
    {"prctl_set", prctl_set, METH_VARARGS, "prctl(option, value) for PDEATHSIG and CHILD_SUBREAPER"},
    {"set_undumpable", set_undumpable, METH_NOARGS, "prctl(PR_SET_DUMPABLE, 0)"},
    {"unshare", unshare_, METH_VARARGS, "unshare(flags)"},
    {"landlock_abi", landlock_abi, METH_NOARGS, "the kernel's Landlock ABI version, 0 without Landlock"},
    {"landlock_create_ruleset", landlock_create_ruleset, METH_VARARGS, "(handled_fs, scoped) -> ruleset fd"},
    {"landlock_add_path", landlock_add_path, METH_VARARGS, "(ruleset fd, O_PATH fd, rights)"},
    {"landlock_restrict", landlock_restrict, METH_VARARGS, "no new privileges, then restrict to the ruleset"},
    {"seccomp_install", seccomp_install, METH_VARARGS, "no new privileges, then apply a BPF filter"},
    {"drop_capabilities", drop_capabilities, METH_NOARGS, "clear every capability set"},
    {"mount", mount_, METH_VARARGS, "(source, target, fstype, flags, data): mount(2)"},
    {"umount2", umount2_, METH_VARARGS, "(target, flags): umount2(2)"},
    {"keyring_clear", keyring_clear, METH_VARARGS, "keyctl(KEYCTL_CLEAR, keyring)"},
    {"ipc_remove", ipc_remove, METH_VARARGS, "(kind, id): remove a SysV IPC object"},
    {"ipc_in_use", ipc_in_use, METH_NOARGS, "whether any SysV IPC object exists in this namespace"},
    {"guard_forks", guard_forks, METH_VARARGS, "(nonce bytearray, report fd): zeroed and closed in every fork; once"},
    {"zygote_serve", zygote_serve, METH_VARARGS, "(socket fd, server pid): the zygote's loop (zygote.py)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_editforge_sys", NULL, -1, methods};

PyMODINIT_FUNC PyInit__editforge_sys(void) { return PyModule_Create(&module); }
