import { spawn } from "node:child_process";
import { join } from "node:path";
import { expect } from "vitest";

// test/support/mcp-worker.ts as a real child process, for the MCP crash and reconcile tests.

const ROOT = join(import.meta.dirname, "..", "..");
const WORKER = join(ROOT, "test", "support", "mcp-worker.ts");

export interface Lines {
  readonly signal: NodeJS.Signals | null;
  readonly lines: ReadonlyArray<Record<string, unknown>>;
  readonly stderr: string;
}

/** Run the MCP worker process to its end, or to its death by SIGKILL at a crash point. */
export const worker = (env: Record<string, string>): Promise<Lines> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", WORKER], {
      cwd: ROOT,
      env: { ...process.env, HOLDFAST_CRASH_AT: "", HOLDFAST_CRASH_CALL: "", ...env },
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
    child.on("close", (_code, signal) =>
      resolve({
        signal,
        stderr,
        lines: stdout
          .split("\n")
          .filter((l) => l.startsWith("{"))
          .map((l) => JSON.parse(l) as Record<string, unknown>),
      }),
    );
  });

export const line = (result: Lines, kind: string) => {
  const found = result.lines.find((l) => l.kind === kind);
  if (!found) throw new Error(`the worker printed no ${kind} line; stderr: ${result.stderr}`);
  return found as Record<string, unknown>;
};

/** Given a first process that submits a call of `tool` and is SIGKILLed at `at` (default: right after its intent). */
export const killedAfterIntent = async (
  env: Record<string, string>,
  tool: string,
  args: unknown,
  at: "after-intent" | "after-effect-before-outcome" = "after-intent",
) => {
  const first = await worker({
    ...env,
    HF_ACTION: "submit",
    HF_TOOL: tool,
    HF_ARGS: JSON.stringify(args),
    HOLDFAST_CRASH_AT: at,
    HOLDFAST_CRASH_CALL: `mcp__${tool}`,
  });
  expect(first.signal).toBe("SIGKILL");
  return line(first, "submitted").runId as string;
};
