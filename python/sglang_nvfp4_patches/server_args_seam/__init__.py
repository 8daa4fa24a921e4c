"""The seam every patch that sets a server-args default goes through: :mod:`.seam` finds where
this SGLang lets a model declare defaults, :mod:`.question` is what a patch asks, :mod:`.launch`
the launch facts it answers from, and :mod:`.hooks` the one hook serving every question."""
