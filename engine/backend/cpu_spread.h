/* cpu_spread.h — keeps a replica thread off the host thread's CPU.
 *
 * A replica thread that slept (the spin budget of spinwait.h ran out: the
 * first step, after an evaluation, a checkpoint) is woken by the host's
 * broadcast, and the scheduler's wake-affine placement may put it on the
 * waker's CPU while the host goes on to run replica 0 there.  The two then
 * share one core until the load balancer moves one of them: measured on the
 * 2-core Zen 5 (session 17, bf16rep), 7 QM9 steps in a row at 2x their time,
 * ~25-60 ms, inside a 40-step `packtrain bench` window — 10-20% of its mean.
 * So a replica that finds itself on the host's CPU moves itself once: its
 * affinity without that CPU (the kernel migrates it before the call
 * returns), then its old affinity again, so the thread is never pinned and
 * the scheduler stays free to move it later.  Bits do not depend on where a
 * thread runs.
 *
 *   pt_thread_leave_cpu(cpu)   1: the calling thread was on cpu and now runs
 *                              on another CPU of its affinity; 0: it was not
 *                              on cpu, or cpu is its only CPU (nothing to
 *                              do); -1: cpu negative or an affinity call
 *                              failed (the old affinity is set again) */
#ifndef PT_CPU_SPREAD_H
#define PT_CPU_SPREAD_H

int pt_thread_leave_cpu(int cpu);

#endif
