import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { failureOf, isErrorFailure, McpCallInDoubt } from "../../src/adapters/integrations/mcp/failure.js";
import { DefiniteFailure } from "../../src/index.js";

const at = {
  server: { name: "srv", version: "1.0.0" },
  method: "tools/call" as const,
  tool: "t",
};

const doubtOf = (error: Error) => (error instanceof McpCallInDoubt ? error.reason : "definite");

describe("what an MCP error means for the journal (law 4: only a proven refusal is an outcome)", () => {
  it("MethodNotFound and InvalidParams answered by the server are definite failures", () => {
    for (const code of [ErrorCode.MethodNotFound, ErrorCode.InvalidParams]) {
      const error = failureOf(new McpError(code, "Unknown tool: t"), at);
      expect(error).toBeInstanceOf(DefiniteFailure);
      expect((error as DefiniteFailure).details).toMatchObject({ code, tool: "t" });
    }
  });

  it("the SDK's timeout, a closed connection, an internal error or any other error leave the call in doubt", () => {
    expect(doubtOf(failureOf(new McpError(ErrorCode.RequestTimeout, "Request timed out"), at))).toBe(
      "timeout",
    );
    expect(doubtOf(failureOf(new McpError(ErrorCode.ConnectionClosed, "Connection closed"), at))).toBe(
      "connection-closed",
    );
    expect(doubtOf(failureOf(new McpError(ErrorCode.InternalError, "boom"), at))).toBe("error");
    expect(doubtOf(failureOf(new McpError(ErrorCode.InvalidRequest, "odd"), at))).toBe("error");
    expect(doubtOf(failureOf(new Error("write EPIPE"), at))).toBe("error");
    expect(doubtOf(failureOf("not even an error", at))).toBe("error");
  });

  it("an InvalidParams the SDK's Server gives after the handler ran (its result check) stays in doubt", () => {
    const error = failureOf(new McpError(ErrorCode.InvalidParams, "Invalid tools/call result: [...]"), at);
    expect(doubtOf(error)).toBe("after-the-tool-ran");
  });

  it("isError is a definite failure, unless it is McpServer's output check, which runs after the tool", () => {
    const refused = isErrorFailure({ content: [{ type: "text", text: "Access denied" }], isError: true }, at);
    expect(refused).toBeInstanceOf(DefiniteFailure);
    const late = isErrorFailure(
      {
        content: [{ type: "text", text: "Output validation error: Invalid structured content for tool t" }],
        isError: true,
      },
      at,
    );
    expect(doubtOf(late)).toBe("after-the-tool-ran");
  });

  it("an in-doubt error names the server, its version, the tool, and what to do next", () => {
    const error = failureOf(new McpError(ErrorCode.RequestTimeout, "Request timed out"), at);
    expect(error.message).toMatch(/^tools\/call t on srv 1\.0\.0: no answer in time .*decide/);
  });
});
