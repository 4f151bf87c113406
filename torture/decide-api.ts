/**
 * A person deciding held runs through the HTTP API, as an operator's script would: `holdfast serve`
 * on the trial's journal, `GET /api/runs?status=held`, each run's view, then one
 * `POST /api/runs/:id/decisions` per run with a decision per call in doubt. The harness knows
 * the truth from the outside witness, so its confirmations are true ones:
 *   - an effect the witness saw → "It happened" (`confirmed-completed`, with the result it had, or
 *     for a model call an answer as a person gives it), or for a model call sometimes "Run it again";
 *   - an effect the witness never saw → "It did not happen" (`confirmed-not-completed`) or
 *     "Run it again" (`new-attempt`);
 *   - a run held with no call in doubt (`crash-loop`) → `resume`.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { serve } from "../src/index.js";

interface CallView {
  readonly callId: string;
  readonly kind: string;
  readonly name: string;
  readonly status: string;
  readonly idempotencyKey: string;
  readonly args: unknown;
}
interface RunView {
  readonly version: number;
  readonly run: { readonly runId: string; readonly heldReasons: ReadonlyArray<{ readonly code: string }> };
  readonly calls: ReadonlyArray<CallView>;
}

/** What the harness decided, per decision kind (for the summary). */
export type DecisionCounts = Record<string, number>;

const TOKEN = "torture-operator-token-0123456789";

const witnessed = (dir: string): Set<string> => {
  const keys = new Set<string>();
  for (const file of ["send.txt", "model.txt", "mcp.txt", "read.txt", "ssh.txt", "terminal.txt"]) {
    const path = join(dir, "witness", file);
    if (!existsSync(path)) continue;
    for (const line of readFileSync(path, "utf8").split("\n")) if (line) keys.add(line.split(" ").at(-1)!);
  }
  return keys;
};

const labelOf = (args: unknown): string =>
  typeof args === "object" && args !== null && typeof (args as { label?: unknown }).label === "string"
    ? (args as { label: string }).label
    : "?";

/** The result a confirmation gives: what the tool would have returned. */
const resultOf = (call: CallView): unknown => {
  const label = labelOf(call.args);
  if (call.kind === "model") return { text: "A person confirmed the answer from the provider's log." };
  if (call.name === "mcp__send") return { content: [{ type: "text", text: `sent ${label}` }] };
  if (call.name === "mcp__read") return { content: [{ type: "text", text: `read ${label}` }] };
  if (call.name === "send") return { sent: label };
  // The SSH and terminal agents' commands: what the command prints (it has no label).
  if (call.name === "ssh" || call.name === "terminal")
    return { exitCode: 0, stdout: "confirmed by a person from the witness\n", stderr: "" };
  // The browser agent's actions: where the page was (a person saw the order on the site).
  if (call.name === "browser") {
    const action = (call.args as { action?: string } | null)?.action ?? "submit";
    return { action, url: "", title: "confirmed by a person from the site's orders" };
  }
  return { read: label };
};

/**
 * Decide every held run of the journal `db` through the API. `random` picks among the true
 * decisions. Returns the decisions made; throws with the server's answer on a refusal.
 */
export const decideThroughApi = async (
  db: string,
  dir: string,
  random: () => number,
  counts: DecisionCounts,
  /** Keys a witness in the harness itself saw (the browser agent's test site), besides the files. */
  alsoSeen: ReadonlySet<string> = new Set(),
): Promise<number> => {
  const server = await serve({ store: db, port: 0, token: TOKEN });
  const headers = { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" };
  const api = async <T>(path: string, init: RequestInit = {}): Promise<T> => {
    const response = await fetch(`${server.url}${path}`, { ...init, headers });
    const text = await response.text();
    if (!response.ok) throw new Error(`${init.method ?? "GET"} ${path}: ${response.status} ${text}`);
    return JSON.parse(text) as T;
  };
  let made = 0;
  try {
    const seen = new Set([...witnessed(dir), ...alsoSeen]);
    const page = await api<{ runs: ReadonlyArray<{ runId: string }> }>("/api/runs?status=held");
    for (const { runId } of page.runs) {
      const path = `/api/runs/${encodeURIComponent(runId)}`;
      const view = await api<RunView>(path);
      const calls: Record<string, { decision: string; note?: string; result?: unknown }> = {};
      for (const call of view.calls.filter((c) => c.status === "in-doubt")) {
        const happened = seen.has(call.idempotencyKey);
        const again = call.kind === "model" && random() < 0.5;
        const decision = happened
          ? again
            ? "new-attempt"
            : "confirmed-completed"
          : call.kind !== "child" && random() < 0.5
            ? "confirmed-not-completed"
            : "new-attempt";
        calls[call.callId] = {
          decision,
          note: `torture: the witness ${happened ? "shows" : "does not show"} ${call.idempotencyKey}`,
          ...(decision === "confirmed-completed" ? { result: resultOf(call) } : {}),
        };
        counts[decision] = (counts[decision] ?? 0) + 1;
      }
      const body =
        Object.keys(calls).length > 0
          ? { basedOnVersion: view.version, decidedBy: "torture", calls }
          : {
              basedOnVersion: view.version,
              decidedBy: "torture",
              decision: "resume",
              note: `torture: held for ${view.run.heldReasons.map((r) => r.code).join(", ")}`,
            };
      if (Object.keys(calls).length === 0) counts.resume = (counts.resume ?? 0) + 1;
      await api(`${path}/decisions`, { method: "POST", body: JSON.stringify(body) });
      made++;
    }
  } finally {
    await server.close();
  }
  return made;
};
