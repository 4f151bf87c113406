import { spawn } from "node:child_process";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..", "..");
const WORKER = join(ROOT, "test", "support", "worker-process.ts");

export interface ProcessResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly lines: ReadonlyArray<Record<string, unknown>>;
  readonly stderr: string;
}

/** Run the holdfast worker process to its end (or its death by SIGKILL at a crash point). */
export const runWorker = (env: Record<string, string>): Promise<ProcessResult> => runScript(WORKER, env);

/** Run a TypeScript file in a child process to its end (or its death by SIGKILL at a crash point). */
export const runScript = (script: string, env: Record<string, string>): Promise<ProcessResult> =>
  new Promise((resolve, reject) => {
    // Node itself (with the tsx loader), so a crash point's SIGKILL kills exactly this process.
    const child = spawn(process.execPath, ["--import", "tsx", script], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code, signal) => {
      const lines = stdout
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      resolve({ code, signal, lines, stderr });
    });
  });

export const lineOf = (result: ProcessResult, kind: string): Record<string, unknown> | undefined =>
  result.lines.find((l) => l.kind === kind);

/** Start the worker and resolve when it has printed `count` lines of `kind`; the caller kills it. */
export const startWorker = (env: Record<string, string>) => startScript(WORKER, env);

/** The same for any TypeScript file: started, its JSON lines collected, killed by the caller. */
export const startScript = (script: string, env: Record<string, string>) => {
  const child = spawn(process.execPath, ["--import", "tsx", script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Array<Record<string, unknown>> = [];
  let buffer = "";
  const waiters: Array<() => void> = [];
  child.stdout.on("data", (d) => {
    buffer += d;
    let nl = buffer.indexOf("\n");
    while (nl >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (line.startsWith("{")) lines.push(JSON.parse(line) as Record<string, unknown>);
      nl = buffer.indexOf("\n");
    }
    for (const w of waiters.splice(0)) w();
  });
  const exited = new Promise<void>((resolve) => child.on("close", () => resolve()));
  return {
    child,
    lines,
    waitFor: async (kind: string, count = 1): Promise<void> => {
      const deadline = Date.now() + 30_000;
      while (lines.filter((l) => l.kind === kind).length < count) {
        if (Date.now() > deadline || child.exitCode !== null)
          throw new Error(`worker never printed ${count} × ${kind}`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 200);
        });
      }
    },
    kill: async () => {
      child.kill("SIGKILL");
      await exited;
    },
  };
};
