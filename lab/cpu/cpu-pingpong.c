// The round trip of one cache line between two CPUs (default 0 and 1), in ns: the two threads
// of a 2-thread benchmark share their data through lines like this one. On a VM the host may
// place the two vCPUs on cores that share a cache (tens of ns) or on cores that do not (hundreds);
// lab/cpu/cpu-decode-ab.sh records it before and after each run.
//   cc -O2 -pthread lab/cpu/cpu-pingpong.c -o pingpong && ./pingpong [cpu_a cpu_b [round_trips]]
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { WARM_UP = 1000 }; // round trips not timed

static int round_trips = 1000000;

static _Alignas(64) atomic_int turn; // odd: the second thread's move, even: the first's

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set);
}

static void * answer(void * arg) {
    if (pin(*(const int *) arg) != 0) {
        perror("pingpong: sched_setaffinity (second cpu)");
        exit(1);
    }
    for (int i = 0; i < WARM_UP + round_trips; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2*i + 1) {
        }
        atomic_store_explicit(&turn, 2*i + 2, memory_order_release);
    }
    return NULL;
}

int main(int argc, char ** argv) {
    int cpu_a = argc > 2 ? atoi(argv[1]) : 0;
    int cpu_b = argc > 2 ? atoi(argv[2]) : 1;
    if (argc > 3) {
        round_trips = atoi(argv[3]);
    }
    if (round_trips < 1) {
        fprintf(stderr, "pingpong: error: round_trips must be a positive number, got '%s'\n", argv[3]);
        return 1;
    }
    if (pin(cpu_a) != 0) {
        perror("pingpong: sched_setaffinity (first cpu)");
        return 1;
    }
    pthread_t other;
    pthread_create(&other, NULL, answer, &cpu_b);
    struct timespec t0, t1;
    for (int i = 0; i < WARM_UP + round_trips; i++) {
        if (i == WARM_UP) { // (the other thread is running by now)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        }
        atomic_store_explicit(&turn, 2*i + 1, memory_order_release);
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2*i + 2) {
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(other, NULL);
    const double ns = ((double) (t1.tv_sec - t0.tv_sec)*1e9 + (double) (t1.tv_nsec - t0.tv_nsec))/round_trips;
    printf("%.0f\n", ns);
    return 0;
}
