import { readFileSync } from "node:fs";
import { localWorkerId } from "../../src/adapters/localWorker.js";

/**
 * A worker id whose process cannot exist here (a pid above the kernel's limit): any other runtime
 * judges it dead and takes its runs over, as it would after the worker was paused past its lease —
 * while the runtime that carries the id in this process goes on, as a paused worker does when it
 * wakes. A stale owner, in process.
 */
export const staleWorkerId = (): string => {
  const pidMax = Number(readFileSync("/proc/sys/kernel/pid_max", "utf8"));
  return localWorkerId().replace(/^([^:]*):\d+:/, `$1:${pidMax + 1}:`);
};

/** A promise and the function that resolves it: a tool waits on it, the test opens it. */
export const gate = (): { readonly open: () => void; readonly opened: Promise<void> } => {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
};
