-- Pickers for search results (quickfix items with user_data.memory_ls = the hit):
-- Telescope, fzf-lua, snacks.nvim when installed, else vim.ui.select; or the quickfix window.
-- A teammate's file (a team index hit, named by a memory-ls:// URI) is on no disk their
-- previewers could read: its preview comes from the team index, and a list without one is
-- handed to them exactly as before.
local M = {}

-- How long a preview waits for a teammate's file from the team index: the UI waits meanwhile
-- (opening the file waits up to 10 s, a preview must not).
M.TEAM_PREVIEW_TIMEOUT_MS = 2000

local function has(mod)
  local ok = pcall(require, mod)
  return ok
end

local function relpath(item)
  local hit = item.user_data and item.user_data.memory_ls
  return hit and hit.path or vim.fn.fnamemodify(item.filename, ":~:.")
end

local function label(item)
  local hit = item.user_data and item.user_data.memory_ls or {}
  return string.format("%s:%d  %s", relpath(item), item.lnum, item.text)
    .. (hit.citation and ("  [" .. hit.citation .. "]") or "")
end
M.label = label

local function is_team(item)
  return vim.startswith(item.filename or "", require("memory_ls").TEAM_SCHEME .. "://")
end

local function has_team(items)
  for _, item in ipairs(items) do
    if is_team(item) then
      return true
    end
  end
  return false
end

--- A teammate's file for a preview: its lines from the team index and true, else one line saying
--- why not and false. Asked once per picker (`texts`, by URI), failures too: moving back to a
--- hit must not wait again.
local function team_text(texts, item)
  local uri = item.filename
  if not texts[uri] then
    local lines, problem = require("memory_ls").team_file_lines(uri, M.TEAM_PREVIEW_TIMEOUT_MS)
    if lines then
      texts[uri] = { lines, true }
    else
      problem = problem:gsub("%s+", " ") -- a server's message may span lines; the preview gets one
      texts[uri] = { { "memory-ls: cannot read " .. relpath(item) .. " from the team index: " .. problem }, false }
    end
  end
  return texts[uri][1], texts[uri][2]
end

-- A teammate's transcript comes as its rendered messages, not JSONL: only notes get a syntax.
local function team_syntax(item)
  return item.filename:match("%.md$") and "markdown" or nil
end

function M.select(items, opts)
  vim.ui.select(items, {
    prompt = opts.title,
    kind = "memory_ls",
    format_item = label,
  }, function(choice)
    if choice then
      opts.on_choice(choice)
    end
  end)
end

function M.quickfix()
  -- The list's title (query, result count, mode) shows in the quickfix window's status line.
  vim.cmd("botright copen")
end

-- Telescope's quickfix previewer reads the disk, but shows the lines of an entry's buffer when
-- that buffer has a 'buftype' (its way for terminals). A teammate's file is previewed that way:
-- the previewer gets a copy of the entry with a scratch buffer holding the text, which it copies
-- at once (one buffer does for all), while actions keep the entry's URI, which opens the file.
local staging
local function staging_buf(lines)
  if not (staging and vim.api.nvim_buf_is_valid(staging)) then
    staging = vim.api.nvim_create_buf(false, true)
  end
  vim.api.nvim_buf_set_lines(staging, 0, -1, false, lines)
  return staging
end

local function telescope_previewer(previewer, texts)
  if not previewer then
    return previewer -- previews turned off
  end
  local preview = previewer.preview
  previewer.preview = function(self, entry, status)
    if not (entry and is_team(entry.value)) then
      return preview(self, entry, status)
    end
    local lines, found = team_text(texts, entry.value)
    local ret = preview(self, setmetatable({ bufnr = staging_buf(lines) }, { __index = entry }), status)
    -- The buffer case sets no syntax (a terminal's has none); its preview buffer is in state.
    local buf = self.state and self.state.bufnr
    if found and buf and team_syntax(entry.value) then
      vim.bo[buf].syntax = team_syntax(entry.value)
    end
    return ret
  end
  return previewer
end

function M.telescope(items, opts)
  local pickers = require("telescope.pickers")
  local finders = require("telescope.finders")
  local conf = require("telescope.config").values
  local actions = require("telescope.actions")
  local action_state = require("telescope.actions.state")
  local previewer = conf.qflist_previewer({})
  if has_team(items) then
    previewer = telescope_previewer(previewer, {})
  end
  pickers
    .new({}, {
      prompt_title = opts.title,
      finder = finders.new_table({
        results = items,
        entry_maker = function(item)
          return {
            value = item,
            display = label(item),
            ordinal = label(item),
            filename = item.filename,
            lnum = item.lnum,
            col = 1,
          }
        end,
      }),
      sorter = conf.generic_sorter({}),
      previewer = previewer,
      attach_mappings = function(prompt_bufnr)
        actions.select_default:replace(function()
          local entry = action_state.get_selected_entry()
          actions.close(prompt_bufnr)
          if entry then
            opts.on_choice(entry.value)
          end
        end)
        return true
      end,
    })
    :find()
end

-- fzf-lua's builtin previewer, with the user's options for it, but a teammate's file shows its
-- text from the team index at the hit's line (fzf-lua would load it the way opening does,
-- waiting as long, or find no file).
local function fzf_previewer(lookup, texts)
  local Team = require("fzf-lua.previewer.builtin").buffer_or_file:extend()
  function Team:populate_preview_buf(entry_str)
    local item = lookup[entry_str]
    if not (item and is_team(item)) then
      return Team.super.populate_preview_buf(self, entry_str)
    end
    self._last_entry = entry_str -- fzf-lua drops a file read that ends after the preview moved on
    local lines, found = team_text(texts, item)
    local buf = self:get_tmp_buffer()
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    self:set_preview_buf(buf)
    -- Then what fzf-lua does after reading a file: cursor on the line, title, syntax by the name;
    -- not cached, its cache being for files on the disk.
    self:preview_buf_post({ path = item.filename, line = found and item.lnum or nil, col = 1, do_not_cache = true })
  end
  local builtin = require("fzf-lua.config").globals.previewers.builtin or {}
  return vim.tbl_extend("force", builtin, {
    _ctor = function()
      return Team
    end,
  })
end

function M.fzf_lua(items, opts)
  local fzf = require("fzf-lua")
  local lookup, entries = {}, {}
  for i, item in ipairs(items) do
    -- "path:line:col: text" lets fzf-lua's builtin previewer show the file at the line.
    local entry = string.format("%s:%d:1: %s", item.filename, item.lnum, item.text)
    if lookup[entry] then
      entry = entry .. string.rep(" ", i)
    end
    lookup[entry] = item
    table.insert(entries, entry)
  end
  fzf.fzf_exec(entries, {
    prompt = "Memory> ",
    winopts = { title = " " .. opts.title .. " " },
    previewer = has_team(items) and fzf_previewer(lookup, {}) or "builtin",
    actions = {
      ["default"] = function(selected)
        local item = selected and lookup[selected[1]]
        if item then
          opts.on_choice(item)
        end
      end,
    },
  })
end

-- snacks' file previewer, but a teammate's file shows its text from the team index at the hit's
-- lines (snacks would find no file).
local function snacks_preview(texts)
  return function(ctx)
    local item = ctx.item.qf
    if not is_team(item) then
      return Snacks.picker.preview.file(ctx)
    end
    local lines, found = team_text(texts, item)
    ctx.preview:reset()
    ctx.preview:set_title(vim.fn.fnamemodify(item.filename, ":t"))
    ctx.preview:set_lines(lines)
    if found then
      if team_syntax(item) then
        ctx.preview:highlight({ ft = team_syntax(item) })
      end
      ctx.preview:loc()
    end
  end
end

function M.snacks(items, opts)
  local picker_items = {}
  for i, item in ipairs(items) do
    table.insert(picker_items, {
      idx = i,
      score = #items - i,
      text = label(item),
      file = item.filename,
      pos = { item.lnum, 0 },
      end_pos = item.end_lnum and { item.end_lnum, 0 } or nil,
      qf = item,
    })
  end
  Snacks.picker.pick({
    source = "memory_ls",
    title = opts.title,
    items = picker_items,
    format = "file",
    preview = has_team(items) and snacks_preview({}) or "file",
    confirm = function(picker, it)
      picker:close()
      if it then
        opts.on_choice(it.qf)
      end
    end,
  })
end

--- Which picker "auto" means here.
function M.detect()
  if has("telescope") then
    return "telescope"
  end
  if has("fzf-lua") then
    return "fzf-lua"
  end
  if type(_G.Snacks) == "table" and Snacks.picker then
    return "snacks"
  end
  return "select"
end

function M.pick(kind, items, opts)
  if kind == "auto" or kind == nil then
    kind = M.detect()
  end
  if kind == "none" or kind == false then
    return
  elseif kind == "quickfix" then
    return M.quickfix(items, opts)
  elseif kind == "telescope" then
    return M.telescope(items, opts)
  elseif kind == "fzf-lua" then
    return M.fzf_lua(items, opts)
  elseif kind == "snacks" then
    return M.snacks(items, opts)
  end
  return M.select(items, opts)
end

return M
