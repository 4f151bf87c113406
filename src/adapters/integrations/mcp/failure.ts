import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import * as Data from "effect/Data";
import { DefiniteFailure } from "../../../runtime/errors.js";
import type { McpServerInfo } from "./describe.js";

/** JSON-RPC codes a server answers with when it refused a request before running anything. */
const REFUSALS: Readonly<Record<number, string>> = {
  [-32601]: "MethodNotFound",
  [-32602]: "InvalidParams",
};

/**
 * Answers the TypeScript SDK's servers give *after* the tool ran, with the codes and shapes of a
 * refusal: `Server` checks a tool's result after its handler returned and answers InvalidParams
 * ("Invalid tools/call result"); `McpServer` checks structured output against the tool's output
 * schema and answers `isError` ("Output validation error"). The effect may have happened.
 */
const AFTER_THE_TOOL_RAN = [
  "Invalid tools/call result",
  "Invalid task creation result",
  "Output validation error",
];

const ranAlready = (text: string): boolean => AFTER_THE_TOOL_RAN.some((marker) => text.includes(marker));

/** Which MCP request a failure belongs to. */
export interface McpRequestAt {
  readonly server: McpServerInfo;
  readonly method: "tools/call" | "tools/list";
  /** The tool's name on the server (tools/call). */
  readonly tool?: string;
}

const where = (at: McpRequestAt): string =>
  `${at.method}${at.tool === undefined ? "" : ` ${at.tool}`} on ${at.server.name} ${at.server.version}`;

/** Why an MCP request is in doubt: nothing shows whether the server acted on it. */
export type McpDoubt = "timeout" | "connection-closed" | "after-the-tool-ran" | "error";

/**
 * An MCP request whose effect nobody can rule out: a timeout, a closed connection or dead server,
 * a transport error, an answer given after the tool ran. Law 4: the call stays in doubt and the run
 * is held for a person; `holdfast show <run>` names the request.
 */
export class McpCallInDoubt extends Data.TaggedError("McpCallInDoubt")<{
  readonly server: McpServerInfo;
  readonly method: string;
  readonly tool: string | null;
  readonly reason: McpDoubt;
  readonly detail: string;
}> {
  override get message(): string {
    const at = where({
      server: this.server,
      method: this.method as McpRequestAt["method"],
      ...(this.tool === null ? {} : { tool: this.tool }),
    });
    return `${at}: ${this.detail}; nothing shows whether the server acted on it — check on the server's side, then decide (\`holdfast show\` lists the decisions)`;
  }
}

/** The agent asked for a tool the server did not list when the toolset was made. Nothing was written. */
export class McpToolNotListed extends Data.TaggedError("McpToolNotListed")<{
  readonly server: McpServerInfo;
  readonly tool: string;
  readonly listed: ReadonlyArray<string>;
}> {
  override get message(): string {
    return `${this.server.name} ${this.server.version} did not list a tool "${this.tool}" when the toolset was made (listed: ${this.listed.join(", ") || "none"}); a tool the server added since needs a new toolset`;
  }
}

/** The shape of the SDK's `McpError` (code, message, data), whichever copy of the SDK made it. */
const mcpErrorOf = (error: unknown): { code: number; message: string; data?: unknown } | null =>
  error instanceof Error &&
  error.name === "McpError" &&
  typeof (error as { code?: unknown }).code === "number"
    ? (error as Error & { code: number; data?: unknown })
    : null;

const textOf = (result: CallToolResult): string =>
  result.content
    .flatMap((part) => (part.type === "text" ? [part.text] : []))
    .join("\n")
    .slice(0, 2_000);

/**
 * What a failed MCP request means for the journal. A refusal the server answered before running
 * anything (JSON-RPC MethodNotFound or InvalidParams: an unknown tool, invalid arguments) is a
 * `DefiniteFailure`, an outcome. Everything else leaves the call in doubt (`McpCallInDoubt`): the
 * SDK's own timeout (it sends `notifications/cancelled`, which a server may ignore or receive after
 * finishing), a connection closed by a dead server, a transport error, an answer that does not
 * parse, a server error (InternalError and others may come after the tool did its work).
 */
export const failureOf = (error: unknown, at: McpRequestAt): Error => {
  const inDoubt = (reason: McpDoubt, detail: string) =>
    new McpCallInDoubt({ server: at.server, method: at.method, tool: at.tool ?? null, reason, detail });
  const mcp = mcpErrorOf(error);
  if (mcp) {
    const refusal = REFUSALS[mcp.code];
    if (refusal !== undefined && !ranAlready(mcp.message)) {
      return new DefiniteFailure(`${where(at)} was refused (${refusal}): ${mcp.message}`, {
        server: at.server,
        method: at.method,
        ...(at.tool === undefined ? {} : { tool: at.tool }),
        code: mcp.code,
        ...(mcp.data === undefined ? {} : { data: mcp.data }),
      });
    }
    if (mcp.code === -32001) return inDoubt("timeout", `no answer in time (${mcp.message})`);
    if (mcp.code === -32000)
      return inDoubt("connection-closed", `the connection closed first (${mcp.message})`);
    if (refusal !== undefined)
      return inDoubt("after-the-tool-ran", `answered after the tool ran: ${mcp.message}`);
    return inDoubt("error", mcp.message);
  }
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return inDoubt("error", message);
};

/**
 * A tool's own error (`isError: true`): the server says the call failed, an outcome like any
 * definite failure — unless the answer is one the SDK gives after the tool ran (see above).
 */
export const isErrorFailure = (result: CallToolResult, at: McpRequestAt): Error => {
  const text = textOf(result);
  if (ranAlready(text)) {
    return new McpCallInDoubt({
      server: at.server,
      method: at.method,
      tool: at.tool ?? null,
      reason: "after-the-tool-ran",
      detail: `answered isError after the tool ran: ${text}`,
    });
  }
  return new DefiniteFailure(`${where(at)} answered with an error (isError): ${text || "(no text)"}`, {
    server: at.server,
    tool: at.tool,
    isError: true,
    content: result.content,
    ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent }),
  });
};

/** A request that provably never left: nothing was sent, so nothing happened. */
export const notSent = (at: McpRequestAt, why: string): DefiniteFailure =>
  new DefiniteFailure(`${where(at)} was not sent: ${why}`, {
    server: at.server,
    method: at.method,
    ...(at.tool === undefined ? {} : { tool: at.tool }),
    sent: false,
  });
