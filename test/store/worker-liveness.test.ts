import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { isWorkerDead, localWorkerId } from "../../src/adapters/localWorker.js";

const ROOT = join(import.meta.dirname, "..", "..");

/** This machine's boot and this process's PID namespace, as /proc tells them. */
const BOOT = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim().replace(/-/g, "").slice(0, 12);
const PID_NAMESPACE = /\d+/.exec(readlinkSync("/proc/self/ns/pid"))![0];
/** A pid no process can have here: above the kernel's limit. */
const NO_SUCH_PID = Number(readFileSync("/proc/sys/kernel/pid_max", "utf8")) + 1;

const HOST = hostname().replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

const idOf = (pid: number, boot: string, pidNamespace: string, startTime: string) =>
  `${hostname()}:${pid}:abc123:${boot}.${pidNamespace}.${startTime}`;

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
});

/** A real process that made its own worker id with holdfast's code, and keeps running. */
const startWorkerProcess = async () => {
  const script = `
    const { localWorkerId } = await import(${JSON.stringify(join(ROOT, "src/adapters/localWorker.ts"))});
    console.log(localWorkerId());
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "inherit"],
  });
  children.push(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const workerId = await new Promise<string>((resolve) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) resolve(out.trim());
    });
  });
  return { child, workerId, exited };
};

describe("worker ids and the dead-worker verdict", () => {
  it("F17: a worker id names its host, pid, a random part and the process's boot, PID namespace and start time", () => {
    const id = localWorkerId();
    expect(id).toMatch(new RegExp(`^${HOST}:${process.pid}:[0-9a-f]{6}:${BOOT}\\.${PID_NAMESPACE}\\.\\d+$`));
    expect(localWorkerId()).not.toBe(id);
    expect(isWorkerDead(id)).toBe(false);
  });

  it("F17: an id from another PID namespace (another container on this kernel) is not dead, even if its pid does not exist here", () => {
    expect(isWorkerDead(idOf(NO_SUCH_PID, BOOT, "4026599999", "12345"))).toBe(false);
  });

  it("F17: an id from another boot (another machine with the same host name, or before a reboot) is not dead, even if its pid does not exist here", () => {
    expect(isWorkerDead(idOf(NO_SUCH_PID, "0123456789ab", PID_NAMESPACE, "12345"))).toBe(false);
  });

  it("F17: ids without the process identity (set by the user, made by an older holdfast) are never judged dead: they wait for the lease", () => {
    expect(isWorkerDead(`${hostname()}:${NO_SUCH_PID}:abc123`)).toBe(false);
    expect(isWorkerDead("worker-7")).toBe(false);
    expect(isWorkerDead("")).toBe(false);
  });

  it("F17: a live worker process is not dead; killed with SIGKILL, it is", async () => {
    const { child, workerId, exited } = await startWorkerProcess();
    expect(workerId).toMatch(
      new RegExp(`^${HOST}:${child.pid}:[0-9a-f]{6}:${BOOT}\\.${PID_NAMESPACE}\\.\\d+$`),
    );
    expect(isWorkerDead(workerId)).toBe(false);
    child.kill("SIGKILL");
    await exited;
    expect(isWorkerDead(workerId)).toBe(true);
  });

  it("F17: a recycled pid — the same pid now held by a process that started at another time — is dead", async () => {
    const { workerId } = await startWorkerProcess();
    const startTime = workerId.split(".").at(-1)!;
    const recycled = workerId.replace(/\.\d+$/, `.${Number(startTime) + 1}`);
    expect(isWorkerDead(workerId)).toBe(false);
    expect(isWorkerDead(recycled)).toBe(true);
    // This very process, under an id of an earlier process that had its pid.
    expect(isWorkerDead(idOf(process.pid, BOOT, PID_NAMESPACE, "1"))).toBe(true);
  });
});
