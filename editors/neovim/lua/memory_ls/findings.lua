-- :MemoryHealth: the memory checks' findings (duplicate, conflict, load-cap, expired, front-matter,
-- orphan) that the memory_ls clients published, in the quickfix list by kind. The server
-- publishes them for every memory file, open or not: Neovim keeps those of a file no window
-- shows under a buffer it created for the URI and never loaded (vim.uri_to_bufnr), and
-- vim.diagnostic.get() returns them too.
local M = {}

M.TITLE = "Memory: Health"
M.SOURCE = "memory-ls"
-- The checks' codes in the order the list shows them (memory_ls/hygiene/findings.py); a code
-- the server adds later comes after them, by name.
M.CODES = { "duplicate", "conflict", "load-cap", "expired", "front-matter", "orphan" }
-- A broken citation in an open document: the document's own problem, not a finding of the memory.
M.CITATION = "citation"

local RANK = {}
for i, c in ipairs(M.CODES) do
  RANK[c] = i
end

local TYPE = { [vim.diagnostic.severity.ERROR] = "E", [vim.diagnostic.severity.WARN] = "W",
  [vim.diagnostic.severity.INFO] = "I", [vim.diagnostic.severity.HINT] = "N" }

--- Whether a vim.diagnostic item is a finding of the memory checks.
function M.is_finding(d)
  local code = d.code ~= nil and tostring(d.code) or ""
  return d.source == M.SOURCE and code ~= "" and code ~= M.CITATION
end

--- The diagnostics the memory_ls clients pushed (every buffer, loaded or not).
function M.diagnostics(client_name)
  local out = {}
  for _, client in ipairs(vim.lsp.get_clients({ name = client_name })) do
    local ns = vim.lsp.diagnostic.get_namespace(client.id, false)
    vim.list_extend(out, vim.diagnostic.get(nil, { namespace = ns }))
  end
  return out
end

--- Quickfix items of the findings among `diags`, by kind, then file, then line; `name_of(bufnr)`
--- gives the file's name to sort by (default: the buffer's name relative to the cwd).
function M.items(diags, name_of)
  name_of = name_of or function(bufnr)
    return vim.fn.fnamemodify(vim.api.nvim_buf_get_name(bufnr), ":.")
  end
  local items = {}
  for _, d in ipairs(diags) do
    if M.is_finding(d) then
      local code = tostring(d.code)
      table.insert(items, {
        bufnr = d.bufnr,
        lnum = d.lnum + 1,
        col = d.col + 1,
        end_lnum = d.end_lnum and d.end_lnum + 1 or nil,
        end_col = d.end_col and d.end_col + 1 or nil,
        type = TYPE[d.severity] or "W",
        text = code .. ": " .. d.message,
        user_data = { code = code, source = M.SOURCE },
        _name = name_of(d.bufnr),
      })
    end
  end
  table.sort(items, function(a, b)
    local ca, cb = a.user_data.code, b.user_data.code
    local ra, rb = RANK[ca] or #M.CODES + 1, RANK[cb] or #M.CODES + 1
    if ra ~= rb then
      return ra < rb
    end
    if ca ~= cb then
      return ca < cb
    end
    if a._name ~= b._name then
      return a._name < b._name
    end
    if a.lnum ~= b.lnum then
      return a.lnum < b.lnum
    end
    return a.col < b.col
  end)
  for _, it in ipairs(items) do
    it._name = nil
  end
  return items
end

--- {code, count} per kind, in the items' order.
function M.counts(items)
  local out, at = {}, {}
  for _, it in ipairs(items) do
    local code = it.user_data.code
    if not at[code] then
      table.insert(out, { code = code, count = 0 })
      at[code] = #out
    end
    out[at[code]].count = out[at[code]].count + 1
  end
  return out
end

--- "Memory: Health (2 duplicate, 1 orphan)"; "(no findings)" when there are none.
function M.title(counts)
  if #counts == 0 then
    return M.TITLE .. " (no findings)"
  end
  local parts = {}
  for _, c in ipairs(counts) do
    table.insert(parts, c.count .. " " .. c.code)
  end
  return M.TITLE .. " (" .. table.concat(parts, ", ") .. ")"
end

--- Fill the quickfix list with the findings and open it (none: say so, and leave the window
--- closed). Returns the items.
function M.show(client_name, notify)
  local items = M.items(M.diagnostics(client_name))
  vim.fn.setqflist({}, " ", { title = M.title(M.counts(items)), items = items })
  if #items == 0 then
    notify("no findings")
  else
    vim.cmd("botright copen")
  end
  return items
end

return M
