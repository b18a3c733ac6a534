-- Stand-ins for Telescope, fzf-lua and snacks.nvim (the real plugins are not installed here): their
-- entry points and the parts of their previewers the plugin meets, to see what each preview shows.
-- Like the real ones, each previewer reads a file from the disk; Telescope's shows the lines of an
-- entry's buffer instead when that buffer has a 'buftype'; fzf-lua's builtin previewer is a class
-- to extend (rxi's classic, as fzf-lua's); snacks' previewer gets a ctx with a preview object.
--
--   local fake = dofile(dir .. "/fake_pickers.lua")
--   local run = fake.run("fzf-lua", items)
--
-- run.shown[i] is what the preview window showed for items[i] ({lines, line}: its buffer's lines
-- and the cursor line); run.previewer is what the plugin handed the picker for previews, and
-- run.stock is the picker's own default previewer (the one it handed before team previews).
local F = {}

-- A floating window to preview in, as the pickers' are.
local function preview_window()
  local buf = vim.api.nvim_create_buf(false, true)
  return vim.api.nvim_open_win(buf, false, { relative = "editor", row = 1, col = 1, width = 70, height = 8 })
end

local function shown(win)
  return {
    lines = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false),
    line = vim.api.nvim_win_get_cursor(win)[1],
  }
end

local function disk(path)
  return vim.fn.filereadable(path) == 1 and vim.fn.readfile(path) or nil
end

-- Telescope: pickers.new(...):find() previews each entry through previewer:preview(entry, status).
local function telescope(run, win)
  -- conf.qflist_previewer: telescope's vimgrep previewer, reduced.
  local Stock = {}
  Stock.__index = Stock
  function Stock:preview(entry, status)
    local buf = vim.api.nvim_create_buf(false, true)
    self.state = { bufnr = buf }
    vim.api.nvim_win_set_buf(status.layout.preview.winid, buf)
    local lines
    if entry.bufnr and vim.api.nvim_buf_is_valid(entry.bufnr) and vim.bo[entry.bufnr].buftype ~= "" then
      lines = vim.api.nvim_buf_get_lines(entry.bufnr, 0, -1, false)
    else
      lines = disk(entry.filename)
      if not lines then
        return -- a path that is not readable: no preview
      end
    end
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    pcall(vim.api.nvim_win_set_cursor, status.layout.preview.winid, { entry.lnum, 0 })
  end
  package.loaded["telescope.config"] = { values = {
    generic_sorter = function() end,
    qflist_previewer = function()
      run.stock = setmetatable({}, Stock)
      return run.stock
    end,
  } }
  package.loaded["telescope.finders"] = { new_table = function(t) return t end }
  package.loaded["telescope.actions"] = { select_default = { replace = function() end }, close = function() end }
  package.loaded["telescope.actions.state"] = { get_selected_entry = function() end }
  package.loaded["telescope.pickers"] = { new = function(_, spec)
    return { find = function()
      run.previewer = spec.previewer
      for _, result in ipairs(spec.finder.results) do
        spec.previewer:preview(spec.finder.entry_maker(result), { layout = { preview = { winid = win } } })
        table.insert(run.shown, shown(win))
      end
    end }
  end }
  return function()
    for _, m in ipairs({ "config", "finders", "actions", "actions.state", "pickers" }) do
      package.loaded["telescope." .. m] = nil
    end
  end
end

-- fzf-lua: fzf_exec(entries, opts) makes the previewer from opts.previewer ("builtin" names the
-- user's builtin previewer options, whose _ctor is the class) and calls populate_preview_buf for
-- each entry, in a coroutine as fzf-lua does.
local function fzf_lua(run, win)
  local Object = {}
  Object.__index = Object
  function Object:extend()
    local cls = {}
    for k, v in pairs(self) do
      if k:find("__") == 1 then
        cls[k] = v
      end
    end
    cls.__index, cls.super = cls, self
    return setmetatable(cls, self)
  end
  function Object:__call(...)
    local obj = setmetatable({}, self)
    obj:new(...)
    return obj
  end
  function Object:new() end

  local BufferOrFile = Object:extend()
  function BufferOrFile:new(o, opts)
    self.o, self.opts = o, opts
  end
  function BufferOrFile:get_tmp_buffer()
    local buf = vim.api.nvim_create_buf(false, true)
    vim.bo[buf].bufhidden = "wipe"
    return buf
  end
  function BufferOrFile:set_preview_buf(buf)
    vim.api.nvim_win_set_buf(self.win.preview_winid, buf)
    self.preview_bufnr = buf
  end
  function BufferOrFile:preview_buf_post(entry)
    if entry.line then
      pcall(vim.api.nvim_win_set_cursor, self.win.preview_winid, { tonumber(entry.line), 0 })
    end
    self.loaded_entry = entry
  end
  function BufferOrFile:populate_preview_buf(entry_str)
    local path, line = entry_str:match("^(.-):(%d+):%d+:")
    local buf = self:get_tmp_buffer()
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, disk(path) or { "Unable to stat file " .. path })
    self:set_preview_buf(buf)
    self:preview_buf_post({ path = path, line = line })
  end

  local builtin = { syntax = true, limit_b = 12345, _ctor = function() return BufferOrFile end }
  run.stock = "builtin"
  package.loaded["fzf-lua.previewer.builtin"] = { buffer_or_file = BufferOrFile }
  package.loaded["fzf-lua.config"] = { globals = { previewers = { builtin = builtin } } }
  package.loaded["fzf-lua"] = { fzf_exec = function(entries, opts)
    run.previewer = opts.previewer
    local spec = type(opts.previewer) == "string" and builtin or opts.previewer
    local previewer = spec._ctor()(spec, opts)
    run.options = previewer.o -- the builtin previewer's options it was made with
    previewer.win = { preview_winid = win }
    for _, entry in ipairs(entries) do
      coroutine.wrap(function()
        previewer:populate_preview_buf(entry)
      end)()
      table.insert(run.shown, shown(win))
    end
  end }
  return function()
    for _, m in ipairs({ "fzf-lua", "fzf-lua.config", "fzf-lua.previewer.builtin" }) do
      package.loaded[m] = nil
    end
  end
end

-- snacks: Snacks.picker.pick(opts) resolves opts.preview (a name in Snacks.picker.preview, or a
-- function) and calls it with a ctx for each item, under pcall.
local function snacks(run, win)
  local preview = { win = win }
  function preview:reset()
    vim.api.nvim_win_set_buf(win, vim.api.nvim_create_buf(false, true))
  end
  function preview:set_title(title)
    self.title = title
  end
  function preview:set_lines(lines)
    vim.api.nvim_buf_set_lines(vim.api.nvim_win_get_buf(win), 0, -1, false, lines)
  end
  function preview:highlight(o)
    self.ft = o.ft
  end
  function preview:loc()
    pcall(vim.api.nvim_win_set_cursor, win, self.item.pos)
  end
  function preview:notify(msg, level)
    self:reset()
    self:set_lines(vim.list_extend({ level .. ": " .. msg, "" }, vim.split(vim.inspect(self.item), "\n")))
  end
  run.stock = "file"
  _G.Snacks = { picker = {
    preview = { file = function(ctx)
      local lines = disk(ctx.item.file)
      if not lines then
        return ctx.preview:notify("file not found: " .. ctx.item.file, "error")
      end
      ctx.preview:reset()
      ctx.preview:set_lines(lines)
      ctx.preview:loc()
    end },
    pick = function(o)
      run.previewer = o.preview
      local fn = type(o.preview) == "string" and Snacks.picker.preview[o.preview] or o.preview
      for _, item in ipairs(o.items) do
        preview.item = item
        local ok, err = pcall(fn, { preview = preview, item = item, picker = {}, buf = vim.api.nvim_win_get_buf(win) })
        if not ok then
          preview:notify(tostring(err), "error")
        end
        table.insert(run.shown, shown(win))
      end
    end,
  } }
  return function()
    _G.Snacks = nil
  end
end

local FAKES = { telescope = telescope, ["fzf-lua"] = fzf_lua, snacks = snacks }

--- Show `items` in the stand-in of picker `kind` ("telescope", "fzf-lua" or "snacks"), previewing
--- each item in turn; what it showed (see the top of the file).
function F.run(kind, items)
  local run = { shown = {} }
  local win = preview_window()
  local remove = FAKES[kind](run, win)
  local ok, err = pcall(require("memory_ls.pickers").pick, kind, items, { title = "t", on_choice = function() end })
  remove()
  vim.api.nvim_win_close(win, true)
  if not ok then
    error(err, 0)
  end
  return run
end

F.KINDS = { "telescope", "fzf-lua", "snacks" }

return F
