import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

/*
 * Worker ids and the liveness test, shared by every process on this host (library and CLI alike):
 * a process must see a crashed one as dead to take its runs over at once instead of waiting out
 * the lease.
 */

/** `<host>:<pid>:<random>`. */
export const localWorkerId = (): string => `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;

/** True only for a worker of this host whose process is gone. */
export const isWorkerDead = (workerId: string): boolean => {
  const [host, pid] = workerId.split(":");
  if (host !== hostname() || !pid || !/^\d+$/.test(pid)) return false;
  if (Number(pid) === process.pid) return false;
  try {
    process.kill(Number(pid), 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
};
