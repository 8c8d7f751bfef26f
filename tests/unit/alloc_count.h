/* alloc_count.h — counts heap allocations of the test process, to check the
 * no-allocation rule of the training step (include once per test binary,
 * after <cmocka.h>).
 *
 * The test binary interposes malloc & co. (the executable's definitions win
 * over libc's for every library in the process, OpenBLAS included) and counts
 * calls while `counting` is set.  Under AddressSanitizer the allocator
 * belongs to ASan, so the counter is compiled out (PT_COUNT_ALLOCS undefined)
 * and tests using it skip. */
#ifndef PT_ALLOC_COUNT_H
#define PT_ALLOC_COUNT_H

#include <stddef.h>

#if !defined(__SANITIZE_ADDRESS__)
#define PT_COUNT_ALLOCS 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
static volatile int counting;
static volatile long n_allocs;
void *malloc(size_t n)
{
    if (counting) n_allocs++;
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    if (counting) n_allocs++;
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    if (counting) n_allocs++;
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t al, size_t n)
{
    if (counting) n_allocs++;
    return __libc_memalign(al, n);
}
int posix_memalign(void **out, size_t al, size_t n)
{
    if (counting) n_allocs++;
    *out = __libc_memalign(al, n);
    return *out ? 0 : 12;
}
void free(void *p)
{
    if (counting && p) n_allocs++;
    __libc_free(p);
}
#endif

#endif
