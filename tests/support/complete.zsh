# Completes one command line in a real interactive zsh, as pressing TAB would, and appends
# each candidate to OUT (one a line), then `__done__`.
#   zsh -f tests/support/complete.zsh DIR_WITH__k3d-gpu OUT 'k3d-gpu plan --det'
# The interactive shell runs under zsh/zpty; `compadd` is wrapped to record what the
# completion function offers, and the shell exits once completion has finished
# (comppostfuncs), so the read loop below ends when the completion does.
zmodload zsh/zpty
dir=$1 out=$2 line=$3
init=$(mktemp)
cat > $init <<INIT
PROMPT=
fpath=($dir \$fpath)
autoload -U compinit && compinit -u -D
compadd () {
    if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then
        builtin compadd "\$@"; return \$?
    fi
    local -a __hits
    builtin compadd -A __hits "\$@"
    (( \$#__hits )) && print -rl -- \$__hits >> $out
    builtin compadd "\$@"
}
finish () { print -r -- __done__ >> $out; exit }
comppostfuncs=( finish )
bindkey '^I' complete-word
print ready
INIT
zpty z zsh -f -i
zpty -w z "source $init"
zpty -r z reply '*ready*'
zpty -w z "$line"$'\t'
while zpty -r z reply; do :; done
rm -f $init
