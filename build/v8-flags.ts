/**
 * The V8 flags the binary starts with (its SEA `execArgv`, see build.ts; NODE_OPTIONS still
 * extends them). bench/objects.ts starts the embedded store with them too, so that the store it
 * measures collects garbage as the binary's does.
 *
 * `--max-semi-space-size=2`: V8's young generation (new space) grows to 16 MiB under the start's
 * allocations and stays resident; capped at 2 MiB a semi-space the idle server holds about 11 MiB
 * less, at no measured CPU cost per request (BENCHMARKS.md, issue 16).
 *
 * `--heap-growing-percent=200`: after each full collection the old generation may grow to three
 * times what survived before the next one starts. V8 otherwise picks the factor (1.1 to 4) from
 * timings; at 1.1 a small heap (about 10 MiB live) is left 10 MiB of headroom, and under a streaming
 * body (each 64 KiB read of a request is a new buffer) V8 then marks the old generation back to back: 9–22 full collections per four 64 MiB PUTs and 4.5–5.8 ms of CPU per
 * MiB, against 1–2 and 3.3–3.4 ms with this flag (every run). Without it the store was in the first
 * mode in 10 runs of 10, with a 2 MiB semi-space alone in 17 of 26; 100 (a factor of 2) was not
 * enough. Idle RSS of the binary: 0.6 MiB more (BENCHMARKS.md, issue 16 part 8).
 */
export const BINARY_V8_FLAGS: readonly string[] = ['--max-semi-space-size=2', '--heap-growing-percent=200'];
