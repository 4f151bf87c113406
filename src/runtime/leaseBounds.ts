/**
 * The shortest lease a runtime accepts: the safety margin (at least 1 s) must fit in it with room to
 * renew. (A module of its own, with no imports: the CLI checks `--lease-ms` without loading the engine.)
 */
export const MIN_LEASE_MS = 3_000;
