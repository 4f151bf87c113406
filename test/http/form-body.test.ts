import { afterEach, describe, expect, it } from "vitest";
import { useTempDir } from "../support/tmp.js";
import { type Given, givenServer } from "./given.js";

const tempDir = useTempDir();
let given: Given | undefined;
afterEach(async () => {
  await given?.close();
  given = undefined;
});

describe("panel forms", () => {
  it("a panel form that does not parse (multipart without its boundary) is a 400 saying what to send, not a 500, and writes nothing (found by the fuzzer)", async () => {
    given = await givenServer(tempDir());
    const { cookie } = await given.login();
    const before = await given.head();
    for (const path of [
      "/login",
      "/logout",
      "/audit",
      "/chats/c/plan",
      "/runs/r/decide",
      "/runs/r/calls/r%2F0/retry",
    ]) {
      const response = await given.request(path, {
        method: "POST",
        auth: "none",
        headers: {
          host: given.panelHost,
          origin: `http://${given.panelHost}`,
          cookie,
          "content-type": "multipart/form-data; boundary=x",
        },
        body: "{}",
      });
      expect(response.status, path).toBe(400);
      expect(await response.text(), path).toContain("the body is not a form");
    }
    expect(await given.head()).toEqual(before);
  });
});
