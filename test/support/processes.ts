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
export const runWorker = (env: Record<string, string>): Promise<ProcessResult> =>
  new Promise((resolve, reject) => {
    // Node itself (with the tsx loader), so a crash point's SIGKILL kills exactly this process.
    const child = spawn(process.execPath, ["--import", "tsx", WORKER], {
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
