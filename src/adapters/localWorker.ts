import { randomBytes } from "node:crypto";
import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";

/*
 * Worker ids and the liveness test, shared by every process on this host (library and CLI alike):
 * a process must see a crashed one as dead to take its runs over at once instead of waiting out
 * the lease. A wrong "dead" is a live worker's runs taken over under it, so the verdict is given
 * only when the id proves it speaks of a process this one can see; anything else waits for the
 * lease (docs/decisions/0011-storage-waits-modes-epochs-and-pruned-inputs.md).
 */

/** Where a process lives: the machine's boot, its PID namespace, and when it started. */
interface ProcessIdentity {
  /** The first 12 hex digits of /proc/sys/kernel/random/boot_id: new at every boot, shared by every container on the kernel. */
  readonly boot: string;
  /** The inode of /proc/self/ns/pid: which PID namespace the pid is a number in. */
  readonly pidNamespace: string;
  /** Field 22 of /proc/<pid>/stat, clock ticks after boot: a recycled pid has another. */
  readonly startTime: string;
}

/** `<host>:<pid>:<random>:<boot>.<pid namespace>.<start time>` — the identity is left out where /proc does not give it. */
const WORKER_ID = /^([^:]*):(\d+):([0-9a-f]+):([0-9a-f]{12})\.(\d+)\.(\d+)$/;

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses). */
const statFields = (pid: number | "self"): string[] | null => {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    // [0] is field 3 (state); pid and comm come before it.
    return [text.slice(0, text.indexOf(" ")), ...fields];
  } catch {
    return null;
  }
};

/** Field `n` (1-based, as in proc(5)) of a stat read by {@link statFields}. */
const statField = (fields: string[], n: number): string | undefined => (n === 1 ? fields[0] : fields[n - 2]);

let ownIdentity: ProcessIdentity | null | undefined;

/**
 * This process's identity, read once; null off Linux or when /proc belongs to another PID
 * namespace than this process (its own pid would read differently there).
 */
const identity = (): ProcessIdentity | null => {
  if (ownIdentity !== undefined) return ownIdentity;
  ownIdentity = null;
  try {
    const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8")
      .trim()
      .replace(/-/g, "")
      .slice(0, 12);
    const pidNamespace = /^pid:\[(\d+)\]$/.exec(readlinkSync("/proc/self/ns/pid"))?.[1];
    const stat = statFields("self");
    const startTime = stat ? statField(stat, 22) : undefined;
    const ownPid = stat ? statField(stat, 1) : undefined;
    if (/^[0-9a-f]{12}$/.test(boot) && pidNamespace && startTime && /^\d+$/.test(startTime)) {
      if (ownPid === String(process.pid)) ownIdentity = { boot, pidNamespace, startTime };
    }
  } catch {
    // No /proc: ids go without the identity, and no worker is ever judged dead from here.
  }
  return ownIdentity;
};

/**
 * `<host>:<pid>:<random>:<boot>.<pid namespace>.<start time>`, e.g.
 * `web-1:4242:9f3a1c:5dfd42d8708c.4026531836.839598`; `<host>:<pid>:<random>` where /proc does
 * not tell the identity (such a worker is never judged dead by another: its runs wait for the lease).
 *
 * @example
 * const workerId = process.env.HOLDFAST_WORKER_ID || localWorkerId();
 */
export const localWorkerId = (): string => {
  const base = `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  const own = identity();
  return own ? `${base}:${own.boot}.${own.pidNamespace}.${own.startTime}` : base;
};

/**
 * True only when the id names a process of this machine's current boot and this PID namespace
 * that no longer runs: its pid is gone, is a zombie, or now belongs to a process that started at
 * another time (the pid was reused). Ids in another format (set by the user, made without /proc,
 * by an older holdfast), of another boot (another machine, or before a reboot) or of another PID
 * namespace (another container) are never dead: their runs wait for the lease.
 *
 * @example
 * isWorkerDead("web-1:4242:9f3a1c:5dfd42d8708c.4026531836.839598") // false while that process runs
 */
export const isWorkerDead = (workerId: string): boolean => {
  const own = identity();
  const parsed = WORKER_ID.exec(workerId);
  if (!own || !parsed) return false;
  const [, , pidText, , boot, pidNamespace, startTime] = parsed;
  if (boot !== own.boot || pidNamespace !== own.pidNamespace) return false;
  const pid = Number(pidText);
  if (pid === process.pid) return startTime !== own.startTime;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: a process of another user runs under that pid; its stat below tells which one.
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return true;
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const stat = statFields(pid);
  // The pid exists but its stat cannot be read (hidepid, a race with its exit): no verdict.
  if (!stat) return false;
  if (statField(stat, 3) === "Z") return true;
  return statField(stat, 22) !== startTime;
};
