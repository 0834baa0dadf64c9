/* A sampling profiler of host time, for machines without perf (the GPU
 * machine has none). Preloaded into a process, a thread of its own signals
 * every other thread of the process each period of wall-clock time; each
 * thread records its call stack, running or blocked (a wait shows as the
 * wait). The samples and the process's memory map are written at exit, and
 * bench/host_sampler_report.py turns them into profiles per thread.
 *
 *   gcc -O2 -shared -fPIC -o /tmp/libhost_sampler.so bench/host_sampler.c -lpthread
 *   HOST_SAMPLER_OUT=/tmp/prof LD_PRELOAD=/tmp/libhost_sampler.so python3 bench/llm_profile.py ...
 *   python3 bench/host_sampler_report.py /tmp/prof.PID
 *
 * HOST_SAMPLER_US: the period in microseconds (default 250).
 * HOST_SAMPLER_MANUAL=1: record only between host_sampler_enable(1) and
 * host_sampler_enable(0), which a program reaches through its global symbols
 * (bench/measure.py's sampled() does, from Python, around the part it times).
 * Stacks come from glibc's backtrace(), which unwinds through .eh_frame and
 * needs no frame pointers; it runs once before sampling starts, so that the
 * handler never loads the unwinder.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { kDepth = 32, kMaxSamples = 1 << 18, kMaxThreads = 256 };

struct Sample {
  int tid;
  int depth;
  void* pc[kDepth];
};

static struct Sample* samples;
static volatile int count;
static volatile int dropped;
static volatile int enabled = 1;
static volatile int running;
static pthread_t sampler;
static int sampler_tid;

void host_sampler_enable(int on) { enabled = on; }

static void on_signal(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)info;
  (void)context;
  if (!enabled) return;
  int i = __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED);
  if (i >= kMaxSamples) {
    __atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  struct Sample* s = &samples[i];
  s->tid = (int)syscall(SYS_gettid);
  s->depth = backtrace(s->pc, kDepth);
}

// The process's threads but the sampler, from /proc/self/task.
static int list_threads(int* tids) {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (!d) return 0;
  struct dirent* e;
  while ((e = readdir(d)) && n < kMaxThreads) {
    int tid = atoi(e->d_name);
    if (tid > 0 && tid != sampler_tid) tids[n++] = tid;
  }
  closedir(d);
  return n;
}

static void* sample_loop(void* arg) {
  long period_us = (long)(size_t)arg;
  sampler_tid = (int)syscall(SYS_gettid);
  int tids[kMaxThreads];
  int n = 0, round = 0;
  pid_t pid = getpid();
  struct timespec wait = {period_us / 1000000, (period_us % 1000000) * 1000};
  while (running) {
    nanosleep(&wait, NULL);
    if (!enabled) continue;
    if (round++ % 64 == 0) n = list_threads(tids);
    for (int i = 0; i < n; ++i) syscall(SYS_tgkill, pid, tids[i], SIGPROF);
  }
  return NULL;
}

__attribute__((constructor)) static void start(void) {
  const char* out = getenv("HOST_SAMPLER_OUT");
  if (!out || !*out) return;
  unsetenv("LD_PRELOAD");  // not into the processes this one starts
  samples = calloc(kMaxSamples, sizeof(struct Sample));
  if (!samples) return;
  void* warm[4];
  backtrace(warm, 4);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  const char* manual = getenv("HOST_SAMPLER_MANUAL");
  if (manual && *manual == '1') enabled = 0;
  const char* us = getenv("HOST_SAMPLER_US");
  long period = us ? atol(us) : 250;
  if (period < 50) period = 50;
  running = 1;
  // The sampler thread blocks SIGPROF: only the others are sampled.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  pthread_create(&sampler, NULL, sample_loop, (void*)(size_t)period);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

__attribute__((destructor)) static void finish(void) {
  const char* out = getenv("HOST_SAMPLER_OUT");
  if (!out || !*out || !samples || !running) return;
  enabled = 0;
  running = 0;
  pthread_join(sampler, NULL);
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", out, (int)getpid());
  FILE* f = fopen(path, "w");
  if (!f) return;
  int n = count < kMaxSamples ? count : kMaxSamples;
  fprintf(f, "samples %d dropped %d pid %d\n", n, dropped, (int)getpid());
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps) {
    char line[8192];
    while (fgets(line, sizeof line, maps)) fprintf(f, "map %s", line);
    fclose(maps);
  }
  for (int i = 0; i < n; ++i) {
    fprintf(f, "s %d", samples[i].tid);
    for (int d = 0; d < samples[i].depth; ++d) fprintf(f, " %lx", (unsigned long)samples[i].pc[d]);
    fputc('\n', f);
  }
  fclose(f);
}
