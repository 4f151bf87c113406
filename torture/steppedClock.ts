import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Debian's libfaketime (`apt-get install libfaketime`); HOLDFAST_TEST_FAKETIME overrides. */
export const FAKETIME_LIBRARY =
  process.env.HOLDFAST_TEST_FAKETIME || "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/**
 * The `clock` fault's means (decision 0080): each worker slot's process runs with libfaketime
 * preloaded, reading its wall-clock offset from a file of its slot at every reading
 * (`FAKETIME_NO_CACHE`), its monotonic clock left alone (`DONT_FAKE_MONOTONIC`): `Date.now` steps
 * when the harness rewrites the file, `performance.now` runs on.
 */
export interface SteppedClocks {
  /** The environment a worker of `slot` is started with. */
  readonly env: (slot: number) => Record<string, string>;
  /** Step the slot's wall clock by `seconds` (negative: back); 0 sets it right. */
  readonly step: (slot: number, seconds: number) => void;
}

/** Throws, saying what to install, when libfaketime is missing (checked before anything starts). */
export const requireFaketime = (): void => {
  if (!existsSync(FAKETIME_LIBRARY))
    throw new Error(
      `the clock fault steps the workers' wall clocks with libfaketime, which is not at ${FAKETIME_LIBRARY}: apt-get install libfaketime (or set HOLDFAST_TEST_FAKETIME to the library)`,
    );
};

/**
 * Offset files under `dir`, one per slot, each at +0 s. Throws when libfaketime is missing: the
 * `clock` fault is never played without it (install it: `apt-get install libfaketime`).
 */
export const steppedClocks = (dir: string, slots: number): SteppedClocks => {
  requireFaketime();
  mkdirSync(dir, { recursive: true });
  const file = (slot: number) => join(dir, `slot-${slot}`);
  const step = (slot: number, seconds: number) => {
    // Written aside and renamed: a reading never sees a half-written offset.
    const next = `${file(slot)}.next`;
    writeFileSync(next, `${seconds >= 0 ? "+" : ""}${Math.round(seconds)}s\n`);
    renameSync(next, file(slot));
  };
  for (let slot = 0; slot < slots; slot++) step(slot, 0);
  return {
    env: (slot) => ({
      LD_PRELOAD: FAKETIME_LIBRARY,
      FAKETIME_TIMESTAMP_FILE: file(slot),
      FAKETIME_NO_CACHE: "1",
      DONT_FAKE_MONOTONIC: "1",
    }),
    step,
  };
};
