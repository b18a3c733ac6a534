// Go to Symbol in Workspace (Ctrl+T) results as VS Code must see them to show them. Pure.

/**
 * The name to give a memory hit in Go to Symbol in Workspace. VS Code filters workspace symbols
 * on its side: it keeps one only when its name fuzzy-matches the query (or the query's first
 * word, the rest matching the container). A memory hit is found by meaning or by a word anywhere
 * in its chunk, so its heading seldom matches and VS Code would drop it: the query follows the
 * heading in the name, which VS Code then always keeps.
 */
export function workspaceSymbolName(heading: string, query: string): string {
  const q = query.trim().replace(/\s+/g, ' ');
  if (!q || heading.toLowerCase().includes(q.toLowerCase())) {
    return heading;
  }
  return `${heading} · ${q}`;
}
