/**
 * The V8 flags the binary starts with (its SEA `execArgv`, see build.ts; NODE_OPTIONS still
 * extends them). bench/objects.ts starts the embedded store with them too, so that the store it
 * measures collects garbage as the binary's does.
 *
 * `--max-semi-space-size=2`: V8's young generation (new space) grows to 16 MiB under the start's
 * allocations and stays resident; capped at 2 MiB a semi-space the idle server holds about 11 MiB
 * less, at no measured CPU cost per request (BENCHMARKS.md, issue 16). Under a large upload the
 * store runs in one of two modes: V8 either marks the old generation back to back (9–22 full
 * collections per four 64 MiB PUTs, 4.5–5.8 ms of CPU per MiB under load) or barely (0–2,
 * 3.4–3.6 ms). Without this flag every run was in the first mode (10 of 10), with it (or a
 * 1 MiB semi-space) 17 of 26 (BENCHMARKS.md, issue 16 part 8).
 */
export const BINARY_V8_FLAGS: readonly string[] = ['--max-semi-space-size=2'];
