/* A model of the disk beneath one folder: only what was synced survives a power cut.
 *
 * Loaded with LD_PRELOAD into the process under test, with POWERCUT_ROOT (the
 * folder, canonical path) and POWERCUT_SHADOW (where the disk's state is kept)
 * in its environment. The shadow folder holds, for each regular file under the
 * root, its content as of its last fsync/fdatasync: the "disk". Data written
 * but not synced lives only in the real file: the "page cache". A power cut is
 * the process killed, then every file under the root put back to its shadow
 * (tests/helpers/powercut.py does that part, and takes the first snapshot).
 *
 * Names (create, rename, unlink) reach the disk at once, as in Jepsen's LazyFS:
 * a renamed file keeps the synced data it had under its old name, a file
 * created and never synced comes back empty. What the model leaves out is in
 * docs/reliability.md ("Power loss").
 *
 * POWERCUT_SYNC_DELAY_MS makes every sync that long (a busy disk): the data
 * reaches the shadow only as the sync returns, so a confirmation that did not
 * wait for its sync is caught even when the sync would have been quick.
 *
 * Every real call goes through the next definition of the symbol (RTLD_NEXT);
 * shadow bookkeeping is serialised by one mutex. Only the calls SQLite and
 * Python make are intercepted: fsync, fdatasync, rename, renameat, renameat2,
 * unlink, unlinkat.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char root[PATH_MAX];
static size_t root_len;
static char shadow[PATH_MAX];
static int active;
static long sync_delay_ms;

static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_renameat2)(int, const char *, int, const char *, unsigned int);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);

static void setup(void) {
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_rename = dlsym(RTLD_NEXT, "rename");
    real_renameat = dlsym(RTLD_NEXT, "renameat");
    real_renameat2 = dlsym(RTLD_NEXT, "renameat2");
    real_unlink = dlsym(RTLD_NEXT, "unlink");
    real_unlinkat = dlsym(RTLD_NEXT, "unlinkat");
    const char *r = getenv("POWERCUT_ROOT");
    const char *s = getenv("POWERCUT_SHADOW");
    if (r && s && *r == '/' && *s == '/' && strlen(r) < PATH_MAX && strlen(s) < PATH_MAX) {
        strcpy(root, r);
        root_len = strlen(root);
        while (root_len > 1 && root[root_len - 1] == '/')
            root[--root_len] = '\0';
        strcpy(shadow, s);
        active = 1;
    }
    const char *d = getenv("POWERCUT_SYNC_DELAY_MS");
    sync_delay_ms = d ? atol(d) : 0;
}

static void ready(void) { pthread_once(&once, setup); }

/* The part of an absolute path under the root, or NULL. */
static const char *under_root(const char *path) {
    if (!active || strncmp(path, root, root_len) != 0 || path[root_len] != '/')
        return NULL;
    return path + root_len + 1;
}

/* ``path`` (relative to ``dirfd``) as an absolute path with a canonical parent. */
static int absolute(int dirfd, const char *path, char *out) {
    char joined[PATH_MAX * 2];
    if (path[0] == '/') {
        snprintf(joined, sizeof joined, "%s", path);
    } else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base))
                return -1;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n < 0)
                return -1;
            base[n] = '\0';
        }
        snprintf(joined, sizeof joined, "%s/%s", base, path);
    }
    char *slash = strrchr(joined, '/');
    const char *name = slash + 1;
    char parent[PATH_MAX];
    *slash = '\0';
    if (!realpath(joined[0] ? joined : "/", parent))
        return -1;
    if ((size_t)snprintf(out, PATH_MAX, "%s/%s", parent, name) >= PATH_MAX)
        return -1;
    return 0;
}

static void shadow_of(const char *rel, char *out) { snprintf(out, PATH_MAX, "%s/%s", shadow, rel); }

static void make_parents(const char *file) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", file);
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);
            *p = '/';
        }
    }
}

/* The file behind ``fd`` is synced: its whole content becomes its shadow. */
static void keep(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink == 0)
        return;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0)
        return;
    path[n] = '\0';
    const char *rel = under_root(path);
    if (!rel)
        return;
    char dest[PATH_MAX], tmp[PATH_MAX + 64];
    shadow_of(rel, dest);
    snprintf(tmp, sizeof tmp, "%s.powercut-%ld", dest, (long)syscall(SYS_gettid));
    make_parents(dest);
    int in = open(link, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return;
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out >= 0) {
        char buf[1 << 16];
        ssize_t got;
        int ok = 1;
        while ((got = read(in, buf, sizeof buf)) > 0) {
            if (write(out, buf, (size_t)got) != got) {
                ok = 0;
                break;
            }
        }
        close(out);
        if (ok && got == 0)
            real_rename(tmp, dest);
        else
            real_unlink(tmp);
    }
    close(in);
}

static void slow_disk(void) {
    if (sync_delay_ms > 0) {
        struct timespec pause = {sync_delay_ms / 1000, (sync_delay_ms % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
}

int fsync(int fd) {
    ready();
    if (active) {
        slow_disk();
        pthread_mutex_lock(&lock);
        keep(fd);
        pthread_mutex_unlock(&lock);
    }
    return real_fsync(fd);
}

int fdatasync(int fd) {
    ready();
    if (active) {
        slow_disk();
        pthread_mutex_lock(&lock);
        keep(fd);
        pthread_mutex_unlock(&lock);
    }
    return real_fdatasync(fd);
}

/* A rename done on the real folder is done on the disk too: the synced data moves with it. */
static void moved(const char *from, const char *to) {
    const char *rel_from = under_root(from), *rel_to = under_root(to);
    char s_from[PATH_MAX], s_to[PATH_MAX];
    if (rel_to)
        shadow_of(rel_to, s_to);
    if (rel_from && rel_to) {
        shadow_of(rel_from, s_from);
        make_parents(s_to);
        if (real_rename(s_from, s_to) != 0)
            real_unlink(s_to); /* never synced under its old name: nothing on the disk */
    } else if (rel_to) {
        real_unlink(s_to); /* moved in from elsewhere: its data is not on this disk */
    } else if (rel_from) {
        shadow_of(rel_from, s_from);
        real_unlink(s_from);
    }
}

static int rename_at(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                     int result) {
    if (result != 0 || !active)
        return result;
    int saved = errno;
    char from[PATH_MAX], to[PATH_MAX];
    /* The new name exists now; the old one is gone, so resolve its parent only. */
    if (absolute(olddirfd, oldpath, from) == 0 && absolute(newdirfd, newpath, to) == 0) {
        pthread_mutex_lock(&lock);
        moved(from, to);
        pthread_mutex_unlock(&lock);
    }
    errno = saved;
    return result;
}

int rename(const char *oldpath, const char *newpath) {
    ready();
    return rename_at(AT_FDCWD, oldpath, AT_FDCWD, newpath, real_rename(oldpath, newpath));
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    ready();
    return rename_at(olddirfd, oldpath, newdirfd, newpath,
                     real_renameat(olddirfd, oldpath, newdirfd, newpath));
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
              unsigned int flags) {
    ready();
    return rename_at(olddirfd, oldpath, newdirfd, newpath,
                     real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags));
}

static int removed(int dirfd, const char *path, int flags, int result) {
    if (result != 0 || !active)
        return result;
    int saved = errno;
    char abs[PATH_MAX], s[PATH_MAX];
    if (absolute(dirfd, path, abs) == 0) {
        const char *rel = under_root(abs);
        if (rel) {
            shadow_of(rel, s);
            pthread_mutex_lock(&lock);
            if (flags & AT_REMOVEDIR)
                rmdir(s);
            else
                real_unlink(s);
            pthread_mutex_unlock(&lock);
        }
    }
    errno = saved;
    return result;
}

int unlink(const char *path) {
    ready();
    return removed(AT_FDCWD, path, 0, real_unlink(path));
}

int unlinkat(int dirfd, const char *path, int flags) {
    ready();
    return removed(dirfd, path, flags, real_unlinkat(dirfd, path, flags));
}
