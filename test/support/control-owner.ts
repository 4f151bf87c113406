import { spawn } from "node:child_process";
import { join } from "node:path";

const WORKER = join(import.meta.dirname, "control-worker.ts");
const ROOT = join(import.meta.dirname, "..", "..");

/**
 * Start test/support/control-worker.ts as the owner process (configured by `env`); collects its JSON
 * lines as they come, and waits for a line of a kind.
 */
export const startOwner = (env: Record<string, string>) => {
  const child = spawn(process.execPath, ["--import", "tsx", WORKER], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Array<Record<string, unknown>> = [];
  let buffer = "";
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  child.stdout.on("data", (d) => {
    buffer += d;
    for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (line.startsWith("{")) lines.push(JSON.parse(line) as Record<string, unknown>);
    }
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.on("close", (_code, signal) => resolve(signal)),
  );
  const waitFor = async (kind: string): Promise<Record<string, unknown>> => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const found = lines.find((l) => l.kind === kind);
      if (found) return found;
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`the owner never printed ${kind}: ${JSON.stringify(lines)} ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { child, waitFor, exited };
};
