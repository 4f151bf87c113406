// The audit lives in ./audit/ (one idea per file); this module keeps its public names where they were.
export * from "./audit/index.js";
