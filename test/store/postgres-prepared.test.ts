import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { prepared } from "../../src/adapters/stores/postgres/pooled.js";

const nameOf = (sql: string) => `hf_${createHash("sha1").update(sql).digest("hex").slice(0, 20)}`;

describe("prepared statements on PostgreSQL", () => {
  it("name each text by its digest and number its placeholders, with fresh values each time, past the bound of remembered texts", () => {
    const sql = "SELECT a FROM t WHERE b = ? AND c = ?";
    const first = prepared(sql, [1, "x"]);
    expect(first).toEqual({
      name: nameOf(sql),
      text: "SELECT a FROM t WHERE b = $1 AND c = $2",
      values: [1, "x"],
    });
    const params = [2, "y"];
    const second = prepared(sql, params);
    expect(second).toEqual({ name: nameOf(sql), text: first.text, values: [2, "y"] });
    // The values are the caller's, copied: changing the array afterwards does not change the query.
    params[0] = 3;
    expect(second.values).toEqual([2, "y"]);
    // More distinct texts than are remembered: each still gets its own name and text.
    for (let i = 0; i < 3000; i++) {
      const text = `SELECT ${i} WHERE x = ?`;
      expect(prepared(text, [i])).toEqual({
        name: nameOf(text),
        text: `SELECT ${i} WHERE x = $1`,
        values: [i],
      });
    }
    expect(prepared(sql, [4, "z"])).toEqual({ name: nameOf(sql), text: first.text, values: [4, "z"] });
  });
});
