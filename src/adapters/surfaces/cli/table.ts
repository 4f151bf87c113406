import Table from "cli-table3";

/** A plain table: no colours, so piped output and terminals read the same. */
export const table = (
  head: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<string | number>>,
): string => {
  const t = new Table({
    head: [...head],
    style: { head: [], border: [] },
    chars: { mid: "", "left-mid": "", "mid-mid": "", "right-mid": "" },
  });
  for (const row of rows) t.push([...row]);
  return t.toString();
};
