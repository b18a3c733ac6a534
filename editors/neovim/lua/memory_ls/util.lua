-- Pure helpers: root detection, results -> quickfix items, citations under the cursor, status
-- text. No LSP calls here, so they are easy to test.
local M = {}

M.MEMORY_MARKERS = { "MEMORY.md", "memory.md", "memory" }
M.FALLBACK_MARKERS = { ".git" }

local uv = vim.uv or vim.loop

--- The workspace folder of `path`: the nearest folder holding MEMORY.md, memory.md or memory/,
--- else the nearest .git folder's parent. `markers` overrides: a list of lists, tried in order.
---@param path string a file or folder
---@param markers? string[][]
---@return string|nil
function M.find_root(path, markers)
  markers = markers or { M.MEMORY_MARKERS, M.FALLBACK_MARKERS }
  if path == nil or path == "" then
    return nil
  end
  path = vim.fs.normalize(vim.fn.fnamemodify(path, ":p"))
  local start = path
  local stat = uv.fs_stat(path)
  if not stat or stat.type ~= "directory" then
    start = vim.fs.dirname(path)
  end
  for _, group in ipairs(markers) do
    local dir = start
    while dir do
      for _, name in ipairs(group) do
        local st = uv.fs_stat(dir .. "/" .. name)
        -- MEMORY.md / memory.md must be files and memory/ a folder; .git may be either (worktrees).
        local want = (name == "memory") and "directory" or (name:match("%.md$") and "file" or nil)
        if st and (want == nil or st.type == want) then
          return dir
        end
      end
      local parent = vim.fs.dirname(dir)
      if parent == dir then
        break
      end
      dir = parent
    end
  end
  return nil
end

local function is_heading(line)
  return line ~= nil and line:match("^ ? ? ?#+%s") ~= nil
end

--- The hit's line best matching the query, as the server found it (`bestLine`); `startLine`
--- when the server is too old to say (or says something outside the hit).
function M.best_line(hit)
  local line = hit.bestLine
  if type(line) == "number" and line >= hit.startLine and line <= (hit.endLine or hit.startLine) then
    return line
  end
  return hit.startLine
end

--- Index (0-based) of the best line in the snippet. A transcript's snippet is rendered messages,
--- not its JSONL lines: 0.
function M.snippet_offset(hit)
  if hit.source == "sessions" or (hit.path or ""):match("%.jsonl$") then
    return 0
  end
  return M.best_line(hit) - hit.startLine
end

--- The first heading of a snippet, else its first non-empty line.
function M.headline(snippet, max)
  max = max or 80
  local first
  for line in ((snippet or "") .. "\n"):gmatch("(.-)\n") do
    local h = line:match("^ ? ? ?#+%s+(.-)%s*#*%s*$")
    if h and h ~= "" then
      first = h
      break
    end
    if not first and line:match("%S") then
      first = vim.trim(line)
    end
  end
  first = first or "(empty)"
  if vim.fn.strchars(first) > max then
    first = vim.fn.strcharpart(first, 0, max - 1) .. "…"
  end
  return first
end

function M.path_lines(hit)
  if hit.startLine == hit.endLine then
    return string.format("%s:%d", hit.path, hit.startLine)
  end
  return string.format("%s:%d-%d", hit.path, hit.startLine, hit.endLine)
end

function M.mode_label(mode)
  if mode == "keyword" then
    return "keyword-only"
  elseif mode == "vector" then
    return "vector-only"
  end
  return mode or "unknown"
end

--- A memory/search result as quickfix items (one per hit, at its best-matching line).
---@return table[] items, string title
--- Why a search came back empty: the server's count of candidates under minScore and the best
--- score (so a user knows to rephrase or lower minScore), and any degradation.
function M.no_results_message(query, result)
  local msg = "no results for " .. query
  local below = result and result.belowMinScore
  if type(below) == "table" and below.count then
    msg = msg .. string.format(" (%d below minScore, best %.2f: rephrase or lower query.minScore)",
      below.count, below.bestScore or 0)
  end
  if result and result.fallbackReason then
    msg = msg .. " (" .. result.fallbackReason .. ")"
  end
  return msg
end

function M.to_qf_items(result, query)
  local items = {}
  for _, hit in ipairs(result.results or {}) do
    local lines = vim.split(hit.snippet or "", "\n", { plain = true })
    local line_text = vim.trim(lines[M.snippet_offset(hit) + 1] or "")
    if line_text == "" or is_heading(line_text) then
      line_text = M.headline(hit.snippet)
    end
    table.insert(items, {
      -- A teammate's file (hit.remote) keeps its memory-ls:// URI as the name: the plugin's
      -- BufReadCmd reads it from the team index.
      filename = vim.uri_to_fname(hit.uri),
      lnum = M.best_line(hit),
      end_lnum = hit.endLine,
      col = 1,
      text = string.format("%.2f %s%s", hit.score or 0, hit.remote and "(team) " or "", line_text),
      user_data = { memory_ls = hit },
    })
  end
  local title = string.format("Memory: %s (%d result%s, %s%s)", query, #items, #items == 1 and "" or "s",
    M.mode_label(result.mode), result.fallbackReason and (": " .. result.fallbackReason) or "")
  return items, title
end

-- Path characters as the server reads them (Python's \w, . and -, and /), where any byte of a
-- non-ASCII character may be one: is_word_char tells afterwards.
local CITE_PATTERNS = { "([%w%._%-/\128-\255]+%.md)#L(%d+)", "([%w%._%-/\128-\255]+%.jsonl)#L(%d+)" }
-- A file under a root outside the workspace: sessions:<root name>/<path> (sessions.roots) or
-- memory:<root name>/<path> (memory.roots).
local PREFIXES = { "sessions:", "memory:" }

--- Whether a non-ASCII character is a word character (a letter or digit of any script, as Python's
--- \w), not punctuation like “ ” or … around a citation.
local function is_word_char(ch)
  local class = vim.fn.charclass(ch)
  return class >= 2 and class ~= 3 -- 0 blank, 1 punctuation, 3 emoji
end

--- A path found by CITE_PATTERNS starting at byte `s` of `line`, trimmed after its last non-ASCII
--- character that is no word character; the new start, or nil when no path is left.
local function trim_path(line, s, path)
  local cut = 0
  local i = 1
  while i <= #path do
    local b = path:byte(i)
    if b < 128 then
      i = i + 1
    else
      local len = b >= 240 and 4 or b >= 224 and 3 or b >= 192 and 2 or 1
      if not is_word_char(path:sub(i, i + len - 1)) then
        cut = i + len - 1
      end
      i = i + len
    end
  end
  path = path:sub(cut + 1)
  if path == "" or path == ".md" or path == ".jsonl" then
    return nil
  end
  s = s + cut
  -- sessions:<root name>/<path> or memory:<root name>/<path>, as the server reads it
  if cut == 0 and path:find("/", 1, true) then
    for _, prefix in ipairs(PREFIXES) do
      if line:sub(s - #prefix, s - 1) == prefix then
        return s - #prefix, prefix .. path
      end
    end
  end
  return s, path
end

--- Every citation in `line`: {citation, path, start, end, col_start (0-based), col_end}.
function M.find_citations(line)
  local out = {}
  local init = 1
  while true do
    local s, e, path, a
    for _, pat in ipairs(CITE_PATTERNS) do
      local s2, e2, p2, a2 = line:find(pat, init)
      if s2 and (not s or s2 < s) then
        s, e, path, a = s2, e2, p2, a2
      end
    end
    if not s then
      return out
    end
    local first = tonumber(a)
    local last = first
    local rest_s, rest_e, b = line:find("^%-L?(%d+)", e + 1)
    if rest_s then
      last = tonumber(b)
      e = rest_e
    end
    s, path = trim_path(line, s, path)
    if s and first >= 1 and last >= first then
      local lead = path:match("^%./") and 2 or 0
      path = path:gsub("^%./", "")
      table.insert(out, {
        citation = line:sub(s + lead, e),
        path = path,
        start = first,
        ["end"] = last,
        col_start = s - 1,
        col_end = e,
      })
    end
    init = e + 1
  end
end

--- The citation under a 0-based byte column of `line`, or nil.
function M.citation_at(line, col)
  for _, c in ipairs(M.find_citations(line)) do
    if col >= c.col_start and col <= c.col_end then
      return c
    end
  end
  return nil
end

--- Text to insert for a citation after the character `before` (a space when glued to a word).
function M.citation_insertion(citation, before)
  if before ~= nil and before ~= "" and not before:match("[%s%(%[{\"'`<]") then
    return " " .. citation
  end
  return citation
end

local function fmt(v)
  if v == nil or v == vim.NIL or v == "" then
    return "-"
  end
  return tostring(v)
end

--- memory/status as readable lines (Markdown).
function M.status_lines(status, server)
  local out = { "# Memory status", "" }
  if server then
    table.insert(out, "Server: " .. server .. (status.version and (" (" .. status.version .. ")") or ""))
    table.insert(out, "")
  end
  if status.watch then
    table.insert(out, "File watching: " .. status.watch)
    table.insert(out, "")
  end
  local folders = status.folders
  if type(folders) ~= "table" or #folders == 0 then
    folders = { status }
  end
  for _, f in ipairs(folders) do
    table.insert(out, "## " .. fmt(f.root or f.folder))
    table.insert(out, "")
    local prov = f.provider
    local mode = M.mode_label(f.mode or ((prov and prov ~= vim.NIL) and "hybrid" or "keyword"))
    if prov and prov ~= vim.NIL then
      local weights = prov.weights and (", " .. prov.weights) or ""
      local dims = prov.dims and (" (" .. prov.dims .. " dims" .. weights .. ")") or ""
      mode = string.format("%s: %s %s%s", mode, prov.id, prov.model, dims)
    elseif f.providerReason and f.providerReason ~= vim.NIL then
      mode = mode .. " (" .. f.providerReason .. ")"
    end
    local rows = {
      { "Search mode", mode },
      { "Active fallback", f.fallbackReason },
      { "Error", f.error },
      { "Files", f.files },
      { "Chunks", f.chunks },
      { "Waiting for vectors", (prov and prov ~= vim.NIL) and f.pendingEmbeddings or nil },
      { "Vector backend", f.vectorBackend and (f.vectorBackend .. (f.sqliteVec and (" (sqlite-vec: " .. f.sqliteVec .. ")") or "")) },
      { "Full-text index", f.fts },
      { "Embedding cache", f.cacheEntries },
      { "Syncing now", f.syncing ~= nil and (f.syncing and "yes" or "no") or nil },
      { "Needs rebuild", f.needsRebuild ~= nil and (f.needsRebuild and "yes" or "no") or nil },
      { "Index file", f.indexPath },
    }
    if type(f.chunksBySource) == "table" and next(f.chunksBySource) then
      local parts = {}
      for k, v in pairs(f.chunksBySource) do
        table.insert(parts, k .. " " .. v)
      end
      table.sort(parts)
      rows[5][2] = string.format("%s (%s)", fmt(f.chunks), table.concat(parts, ", "))
    end
    local ls = f.lastSync
    if type(ls) == "table" then
      table.insert(rows, { "Last sync", string.format("%s at %s, %d ms: %s files, %s indexed, %s unchanged, %s removed, %s embedded",
        fmt(ls.reason), fmt(ls.startedAt), math.floor((ls.durationMs or 0) + 0.5), fmt(ls.files), fmt(ls.indexed),
        fmt(ls.unchanged), fmt(ls.removed), fmt(ls.embedded)) })
    end
    for _, row in ipairs(rows) do
      if row[2] ~= nil and row[2] ~= vim.NIL then
        table.insert(out, string.format("%-22s %s", row[1], fmt(row[2])))
      end
    end
    for _, list in ipairs({ { "Settings problems", f.settingsProblems },
      { "Skipped in the last sync", type(ls) == "table" and ls.skipped or nil },
      { "Open documents indexed from the editor", f.openDocuments } }) do
      if type(list[2]) == "table" and #list[2] > 0 then
        table.insert(out, "")
        table.insert(out, list[1] .. ":")
        for _, item in ipairs(list[2]) do
          table.insert(out, "  - " .. tostring(item))
        end
      end
    end
    table.insert(out, "")
  end
  return out
end

--- The folders of a memory.reindex / memory.sync answer that were not synced, each with why.
function M.sync_failures(result)
  local out = {}
  if type(result) ~= "table" or type(result.folders) ~= "table" then
    return out
  end
  for _, f in ipairs(result.folders) do
    if type(f) == "table" and type(f.error) == "string" then
      local name = type(f.folder) == "string" and vim.fn.fnamemodify(vim.uri_to_fname(f.folder), ":t") or "a folder"
      table.insert(out, name .. ": " .. f.error)
    end
  end
  return out
end

--- One line about a memory.reindex / memory.sync answer.
function M.sync_summary(result)
  local reports = {}
  local function visit(v)
    if type(v) ~= "table" then
      return
    end
    if vim.islist and vim.islist(v) or (not vim.islist and vim.tbl_islist(v)) then
      for _, x in ipairs(v) do
        visit(x)
      end
    elseif type(v.folders) == "table" then
      visit(v.folders)
    elseif type(v.files) == "number" then
      table.insert(reports, v)
    elseif type(v.report) == "table" then
      visit(v.report)
    end
  end
  visit(result)
  local failed = M.sync_failures(result)
  local not_synced = #failed > 0 and ("not synced: " .. table.concat(failed, "; ")) or nil
  if #reports == 0 then
    return not_synced or "index updated"
  end
  local sum = function(k)
    local n = 0
    for _, r in ipairs(reports) do
      n = n + (tonumber(r[k]) or 0)
    end
    return n
  end
  local full = false
  local ms = 0
  for _, r in ipairs(reports) do
    full = full or r.full == true
    ms = math.max(ms, tonumber(r.durationMs) or 0)
  end
  local line = string.format("%s %d files: %d indexed, %d unchanged, %d removed, %d chunks embedded in %.2f s",
    full and "rebuilt" or "synced", sum("files"), sum("indexed"), sum("unchanged"), sum("removed"), sum("embedded"),
    ms / 1000)
  return not_synced and (line .. "; " .. not_synced) or line
end

return M
